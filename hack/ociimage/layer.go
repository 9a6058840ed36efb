package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// entriesLayer builds the top layer from entries: parent directories first
// (0755), then every entry, sorted by path, all owned by root and dated mtime.
func entriesLayer(entries []Entry, mtime time.Time, opts ...tarball.LayerOption) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range withParents(entries) {
		if err := writeEntry(tw, e, mtime); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, opts...)
}

// withParents returns entries plus a Dir entry for every parent directory not
// given, sorted by path, so the layer unpacks the same on every runtime.
func withParents(entries []Entry) []Entry {
	have := map[string]bool{}
	for _, e := range entries {
		have[e.Path] = true
	}
	out := append([]Entry(nil), entries...)
	for _, e := range entries {
		for d := path.Dir(e.Path); d != "/"; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				out = append(out, Entry{Kind: Dir, Path: d, Mode: 0o755})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func writeEntry(tw *tar.Writer, e Entry, mtime time.Time) error {
	h := &tar.Header{
		Name:    strings.TrimPrefix(e.Path, "/"),
		Mode:    e.Mode,
		ModTime: mtime,
		Format:  tar.FormatPAX,
	}
	switch e.Kind {
	case Dir:
		h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		return tw.WriteHeader(h)
	case Symlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Source
		return tw.WriteHeader(h)
	}
	data := e.Data
	if data == nil {
		var err error
		if data, err = os.ReadFile(e.Source); err != nil {
			return fmt.Errorf("layer entry %s: %w", e.Path, err)
		}
	}
	h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
