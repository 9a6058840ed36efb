package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// Layout is an oci-archive read back into memory: every file by name.
type Layout struct {
	files map[string][]byte
}

// ReadLayout reads an oci-archive.
func ReadLayout(r io.Reader) (*Layout, error) {
	l := &Layout{files: map[string][]byte{}}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return l, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		l.files[strings.TrimPrefix(h.Name, "./")] = b
	}
}

// Blob returns the blob d, checking its content hashes to d.
func (l *Layout) Blob(d v1.Hash) ([]byte, error) {
	b, ok := l.files["blobs/"+d.Algorithm+"/"+d.Hex]
	if !ok {
		return nil, fmt.Errorf("blob %s missing", d)
	}
	if sum := sha256.Sum256(b); fmt.Sprintf("%x", sum) != d.Hex {
		return nil, fmt.Errorf("blob %s does not hash to its name", d)
	}
	return b, nil
}

// Top returns index.json's one descriptor and the image index it points to.
func (l *Layout) Top() (v1.Descriptor, *v1.IndexManifest, error) {
	var top v1.IndexManifest
	if err := json.Unmarshal(l.files["index.json"], &top); err != nil {
		return v1.Descriptor{}, nil, fmt.Errorf("index.json: %w", err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != types.OCIImageIndex {
		return v1.Descriptor{}, nil, fmt.Errorf("index.json lists %d descriptors, want one image index", len(top.Manifests))
	}
	idx, err := l.IndexManifest(top.Manifests[0].Digest)
	return top.Manifests[0], idx, err
}

// IndexManifest parses the image index d.
func (l *Layout) IndexManifest(d v1.Hash) (*v1.IndexManifest, error) {
	b, err := l.Blob(d)
	if err != nil {
		return nil, err
	}
	return v1.ParseIndexManifest(bytes.NewReader(b))
}

// Manifest parses the image or artifact manifest d.
func (l *Layout) Manifest(d v1.Hash) (*v1.Manifest, error) {
	b, err := l.Blob(d)
	if err != nil {
		return nil, err
	}
	return v1.ParseManifest(bytes.NewReader(b))
}

// Image is the image whose manifest is d.
func (l *Layout) Image(d v1.Hash) (v1.Image, error) {
	raw, err := l.Blob(d)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&layoutImage{l: l, raw: raw})
}

// layoutImage is partial.CompressedImageCore over a Layout.
type layoutImage struct {
	l   *Layout
	raw []byte
}

func (li *layoutImage) manifest() (*v1.Manifest, error) {
	return v1.ParseManifest(bytes.NewReader(li.raw))
}
func (li *layoutImage) RawManifest() ([]byte, error) { return li.raw, nil }

func (li *layoutImage) MediaType() (types.MediaType, error) {
	m, err := li.manifest()
	if err != nil {
		return "", err
	}
	return m.MediaType, nil
}

func (li *layoutImage) RawConfigFile() ([]byte, error) {
	m, err := li.manifest()
	if err != nil {
		return nil, err
	}
	return li.l.Blob(m.Config.Digest)
}

func (li *layoutImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	m, err := li.manifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Layers {
		if d.Digest == h {
			b, err := li.l.Blob(h)
			if err != nil {
				return nil, err
			}
			return &layoutLayer{desc: d, data: b}, nil
		}
	}
	return nil, fmt.Errorf("layer %s not in the manifest", h)
}

type layoutLayer struct {
	desc v1.Descriptor
	data []byte
}

func (ll *layoutLayer) Digest() (v1.Hash, error)            { return ll.desc.Digest, nil }
func (ll *layoutLayer) Size() (int64, error)                { return ll.desc.Size, nil }
func (ll *layoutLayer) MediaType() (types.MediaType, error) { return ll.desc.MediaType, nil }
func (ll *layoutLayer) Compressed() (io.ReadCloser, error)  { return bytesOpener(ll.data)() }
