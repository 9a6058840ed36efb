package main

import (
	"fmt"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Summary is what an oci-archive from `ociimage index` holds.
type Summary struct {
	Ref       string
	Index     v1.Hash
	Platforms map[string]*PlatformSummary // by os/arch
}

// PlatformSummary is one platform's image and its SBOM.
type PlatformSummary struct {
	Manifest   v1.Hash
	Layers     int
	Compressed int64 // manifest, config and layers
	SBOM       []byte
	SBOMDigest v1.Hash
	Counts     SBOMCounts
}

// Summarize walks the archive's index: image manifests by platform, SBOM
// artifacts matched to their subject (which must be an image of the
// index), every blob checked against its digest.
func Summarize(l *Layout) (*Summary, error) {
	top, idx, err := l.Top()
	if err != nil {
		return nil, err
	}
	s := &Summary{Ref: top.Annotations[annRefName], Index: top.Digest, Platforms: map[string]*PlatformSummary{}}
	byDigest := map[v1.Hash]*PlatformSummary{}
	var artifacts []v1.Descriptor
	for _, d := range idx.Manifests {
		if d.ArtifactType != "" {
			artifacts = append(artifacts, d)
			continue
		}
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil {
			return nil, fmt.Errorf("index entry %s: want an OCI image manifest with a platform", d.Digest)
		}
		ps, err := summarizeImage(l, d)
		if err != nil {
			return nil, err
		}
		key := d.Platform.OS + "/" + d.Platform.Architecture
		if s.Platforms[key] != nil {
			return nil, fmt.Errorf("two images for %s", key)
		}
		s.Platforms[key], byDigest[d.Digest] = ps, ps
	}
	for _, d := range artifacts {
		if err := attachSBOM(l, d, byDigest); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func summarizeImage(l *Layout, d v1.Descriptor) (*PlatformSummary, error) {
	m, err := l.Manifest(d.Digest)
	if err != nil {
		return nil, err
	}
	ps := &PlatformSummary{Manifest: d.Digest, Layers: len(m.Layers), Compressed: d.Size + m.Config.Size}
	if _, err := l.Blob(m.Config.Digest); err != nil {
		return nil, err
	}
	for _, ld := range m.Layers {
		if _, err := l.Blob(ld.Digest); err != nil {
			return nil, err
		}
		ps.Compressed += ld.Size
	}
	return ps, nil
}

func attachSBOM(l *Layout, d v1.Descriptor, images map[v1.Hash]*PlatformSummary) error {
	m, err := l.Manifest(d.Digest)
	if err != nil {
		return err
	}
	if m.ArtifactType != SBOMArtifactType || d.ArtifactType != SBOMArtifactType || len(m.Layers) != 1 {
		return fmt.Errorf("artifact %s: want one %s blob", d.Digest, SBOMArtifactType)
	}
	if m.Subject == nil || images[m.Subject.Digest] == nil {
		return fmt.Errorf("artifact %s: its subject is no image of the index", d.Digest)
	}
	ps := images[m.Subject.Digest]
	if ps.SBOM != nil {
		return fmt.Errorf("image %s has two SBOMs", m.Subject.Digest)
	}
	if ps.SBOM, err = l.Blob(m.Layers[0].Digest); err != nil {
		return err
	}
	ps.SBOMDigest = m.Layers[0].Digest
	if ps.Counts, err = ValidateSBOM(ps.SBOM); err != nil {
		return fmt.Errorf("SBOM of %s: %w", m.Subject.Digest, err)
	}
	return nil
}

func (s *Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s index %s\n", s.Ref, s.Index)
	for _, p := range sortedKeys(s.Platforms) {
		ps := s.Platforms[p]
		fmt.Fprintf(&b, "  %s manifest %s: %d layers, %.1f MB compressed\n", p, ps.Manifest, ps.Layers, float64(ps.Compressed)/1e6)
		if ps.SBOM != nil {
			fmt.Fprintf(&b, "    SBOM %s (SPDX 2.3, valid): %d Go modules, %d Debian packages\n", ps.SBOMDigest, ps.Counts.GoModules, ps.Counts.Debian)
		}
	}
	return b.String()
}

func hostGOARCH() string { return runtime.GOARCH }
