package main

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// registryRoot is where agnhost's fake-registry-server reads its images
// (upstream's image fills it at build time from registry.k8s.io).
const registryRoot = "/var/registry"

// RegistryLayer writes to w an uncompressed layer tar holding img under
// registryRoot/<image> in the layout fake-registry-server serves: the
// manifest and blobs at <kind>/sha256/<2 hex>/<hex>/data, and a tag file
// holding the manifest's digest. Entries are sorted and dated mtime, so
// the layer is reproducible.
func RegistryLayer(w io.Writer, img v1.Image, image, tag string, mtime time.Time) error {
	files, err := registryFiles(img, path.Join(registryRoot, image), tag)
	if err != nil {
		return err
	}
	var entries []Entry
	for p, data := range files {
		entries = append(entries, Entry{Kind: File, Path: p, Mode: 0o644, Data: data})
	}
	tw := tar.NewWriter(w)
	for _, e := range withParents(entries) {
		if err := writeEntry(tw, e, mtime); err != nil {
			return err
		}
	}
	return tw.Close()
}

// registryFiles maps every path of one image's registry tree to its
// content.
func registryFiles(img v1.Image, dir, tag string) (map[string][]byte, error) {
	files := map[string][]byte{}
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	files[digestPath(dir, "manifests", digest)] = manifest
	files[path.Join(dir, "manifests", tag)] = []byte(digest.String() + "\n")
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	files[digestPath(dir, "blobs", configDigest)] = config
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		if err := addLayerBlob(files, dir, l); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func addLayerBlob(files map[string][]byte, dir string, l v1.Layer) error {
	d, err := l.Digest()
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("layer %s: %w", d, err)
	}
	files[digestPath(dir, "blobs", d)] = data
	return nil
}

// digestPath is fake-registry-server's digestToPath.
func digestPath(dir, kind string, d v1.Hash) string {
	return path.Join(dir, kind, d.Algorithm, d.Hex[:2], d.Hex, "data")
}

// runRegistry is `ociimage registry -i IMAGE.tar -image NAME -tag TAG -o LAYER.tar`.
func runRegistry(args []string) error {
	fs := newFlagSet("ociimage registry")
	in := fs.String("i", "", "input docker-archive tarball (one image)")
	image := fs.String("image", "", "image name in the registry (e.g. pause)")
	tag := fs.String("tag", "", "tag to serve it under (e.g. testing)")
	out := fs.String("o", "", "output layer tar")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *image == "" || *tag == "" || *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("registry: want -i, -image, -tag and -o")
	}
	img, err := tarball.ImageFromPath(*in, nil)
	if err != nil {
		return fmt.Errorf("reading %s: %w", *in, err)
	}
	mtime, err := sourceDate()
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := RegistryLayer(f, img, *image, *tag, mtime); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
