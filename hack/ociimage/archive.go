package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteArchive writes ix as an OCI image layout in one tar (an oci-archive):
// oci-layout, index.json naming the index ref, and blobs/sha256/*. `podman
// load` takes the one descriptor of index.json and its ref.name annotation;
// `ctr images import` the io.containerd.image.name one. Entries are sorted,
// owned by root and dated mtime, so equal inputs give an equal file.
func (ix *Index) WriteArchive(w io.Writer, ref string, mtime time.Time) error {
	top := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIImageIndex, Size: int64(len(ix.Raw)), Digest: ix.Digest,
			Annotations: map[string]string{annRefName: ref, annContainerdName: ref},
		}},
	}
	indexJSON, err := json.Marshal(top)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
	}{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", indexJSON}} {
		if err := writeTarFile(tw, f.name, int64(len(f.data)), mtime, bytesOpener(f.data)); err != nil {
			return err
		}
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		h := &tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if err := ix.writeBlobs(tw, mtime); err != nil {
		return err
	}
	return tw.Close()
}

func (ix *Index) writeBlobs(tw *tar.Writer, mtime time.Time) error {
	digests := make([]v1.Hash, 0, len(ix.blobs))
	for d := range ix.blobs {
		digests = append(digests, d)
	}
	sort.Slice(digests, func(i, j int) bool { return digests[i].Hex < digests[j].Hex })
	for _, d := range digests {
		b := ix.blobs[d]
		if err := writeTarFile(tw, "blobs/"+d.Algorithm+"/"+d.Hex, b.size, mtime, b.open); err != nil {
			return fmt.Errorf("blob %s: %w", d, err)
		}
	}
	return nil
}

func writeTarFile(tw *tar.Writer, name string, size int64, mtime time.Time, open func() (io.ReadCloser, error)) error {
	h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: mtime, Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(tw, rc)
	if err == nil && n != size {
		err = fmt.Errorf("wrote %d bytes, want %d", n, size)
	}
	return err
}
