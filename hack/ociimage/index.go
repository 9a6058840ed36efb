package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// SBOMArtifactType is the artifactType of an SBOM manifest and the
	// media type of its one blob (IANA's type for SPDX JSON).
	SBOMArtifactType = "application/spdx+json"
	// emptyConfigType is the OCI 1.1 config of an artifact that has none.
	emptyConfigType types.MediaType = "application/vnd.oci.empty.v1+json"
	// annRefName and annContainerdName name the image in index.json:
	// podman reads the first, ctr the second.
	annRefName        = "org.opencontainers.image.ref.name"
	annContainerdName = "io.containerd.image.name"
	annTitle          = "org.opencontainers.image.title"
)

// PlatformImage is one architecture's image and the SBOM that describes it.
type PlatformImage struct {
	Image v1.Image
	SBOM  []byte // SPDX JSON; nil for none
}

// blobSource opens one blob of the layout.
type blobSource struct {
	size int64
	open func() (io.ReadCloser, error)
}

// Index is a multi-architecture image: an OCI image index listing one image
// manifest per platform and, for every image with an SBOM, an artifact
// manifest whose subject is that image (OCI 1.1 referrers), plus every blob
// they reference.
type Index struct {
	Manifest v1.IndexManifest
	Raw      []byte
	Digest   v1.Hash
	blobs    map[v1.Hash]blobSource
}

// BuildIndex assembles the index of images, in the order given.
func BuildIndex(images []PlatformImage) (*Index, error) {
	ix := &Index{blobs: map[v1.Hash]blobSource{}}
	ix.Manifest = v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	var sboms []v1.Descriptor
	for _, pi := range images {
		desc, err := ix.addImage(pi.Image)
		if err != nil {
			return nil, err
		}
		ix.Manifest.Manifests = append(ix.Manifest.Manifests, desc)
		if pi.SBOM != nil {
			d, err := ix.addSBOM(pi.SBOM, desc)
			if err != nil {
				return nil, err
			}
			sboms = append(sboms, d)
		}
	}
	// The SBOMs come after every image: a client that takes the first
	// manifest without looking at platforms still gets an image.
	ix.Manifest.Manifests = append(ix.Manifest.Manifests, sboms...)
	raw, err := json.Marshal(ix.Manifest)
	if err != nil {
		return nil, err
	}
	ix.Raw, ix.Digest = raw, ix.addBytes(raw)
	return ix, nil
}

// addImage adds an image's manifest, config and layers, and returns its
// descriptor with the platform its config names.
func (ix *Index) addImage(img v1.Image) (v1.Descriptor, error) {
	mt, err := img.MediaType()
	if err != nil {
		return v1.Descriptor{}, err
	}
	if mt != types.OCIManifestSchema1 {
		return v1.Descriptor{}, fmt.Errorf("image has media type %s, want OCI (Spec.OCI)", mt)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Descriptor{}, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return v1.Descriptor{}, err
	}
	ix.addBytes(cfg)
	layers, err := img.Layers()
	if err != nil {
		return v1.Descriptor{}, err
	}
	for _, l := range layers {
		if err := ix.addLayer(l); err != nil {
			return v1.Descriptor{}, err
		}
	}
	return v1.Descriptor{
		MediaType: mt, Size: int64(len(raw)), Digest: ix.addBytes(raw),
		Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant},
	}, nil
}

func (ix *Index) addLayer(l v1.Layer) error {
	d, err := l.Digest()
	if err != nil {
		return err
	}
	size, err := l.Size()
	if err != nil {
		return err
	}
	ix.blobs[d] = blobSource{size: size, open: l.Compressed}
	return nil
}

// addSBOM adds an artifact manifest carrying sbom, with subject as its
// subject, and returns its descriptor. Its platform is unknown/unknown, as
// buildx marks its attestations, so engines that pick an image by platform
// never pick it.
func (ix *Index) addSBOM(sbom []byte, subject v1.Descriptor) (v1.Descriptor, error) {
	empty := []byte("{}")
	subj := subject
	subj.Platform = nil
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  SBOMArtifactType,
		Config:        v1.Descriptor{MediaType: emptyConfigType, Size: int64(len(empty)), Digest: ix.addBytes(empty)},
		Layers: []v1.Descriptor{{
			MediaType: SBOMArtifactType, Size: int64(len(sbom)), Digest: ix.addBytes(sbom),
			Annotations: map[string]string{annTitle: "sbom.spdx.json"},
		}},
		Subject: &subj,
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return v1.Descriptor{}, err
	}
	return v1.Descriptor{
		MediaType: types.OCIManifestSchema1, ArtifactType: SBOMArtifactType,
		Size: int64(len(raw)), Digest: ix.addBytes(raw),
		Platform: &v1.Platform{OS: "unknown", Architecture: "unknown"},
	}, nil
}

// addBytes stores b as a blob and returns its digest.
func (ix *Index) addBytes(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	h := v1.Hash{Algorithm: "sha256", Hex: fmt.Sprintf("%x", sum)}
	ix.blobs[h] = blobSource{size: int64(len(b)), open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
	return h
}
