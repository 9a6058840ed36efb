package main

import (
	"archive/tar"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeTar makes a base-layer tar holding the given regular files.
func writeTar(t *testing.T, p string, files map[string]string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, n := range sortedKeys(files) {
		body := files[n]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// layerHeaders lists name -> header of one layer.
func layerHeaders(t *testing.T, l v1.Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

func buildArchive(t *testing.T, dir string, extra ...string) (string, []string) {
	t.Helper()
	base := filepath.Join(dir, "rootfs.tar")
	writeTar(t, base, map[string]string{"etc/os-release": "ID=debian\n"})
	bin := filepath.Join(dir, "daemon")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	tags := []string{"localhost/switchyard:v1", "registry.k8s.io/e2e-test-images/agnhost:2.66.1"}
	args := []string{"-o", out, "-layer", base, "-file", bin + ":/usr/local/bin/switchyard:0755",
		"-dir", "/uploads", "-symlink", "/agnhost-2:agnhost", "-entrypoint", `["/usr/local/bin/switchyard"]`,
		"-cmd", `["--help"]`, "-env", "A=b", "-tag", tags[0], "-tag", tags[1]}
	if err := run(append(args, extra...)); err != nil {
		t.Fatal(err)
	}
	return out, tags
}

func TestBuildAndReadBack(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	out, tags := buildArchive(t, t.TempDir())
	for _, tag := range tags {
		ref, err := name.NewTag(tag)
		if err != nil {
			t.Fatal(err)
		}
		img, err := tarball.ImageFromPath(out, &ref)
		if err != nil {
			t.Fatalf("%s not in the archive: %v", tag, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if got := cf.Config.Entrypoint; !reflect.DeepEqual(got, []string{"/usr/local/bin/switchyard"}) {
			t.Errorf("entrypoint %q", got)
		}
		if got := cf.Config.Env; !reflect.DeepEqual(got, []string{defaultPath, "A=b"}) {
			t.Errorf("env %q", got)
		}
		if cf.OS != "linux" || cf.Created.Unix() != 1700000000 {
			t.Errorf("os %q created %v", cf.OS, cf.Created)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 2 {
			t.Fatalf("layers %d, %v", len(layers), err)
		}
		if _, ok := layerHeaders(t, layers[0])["etc/os-release"]; !ok {
			t.Error("base layer lost etc/os-release")
		}
		top := layerHeaders(t, layers[1])
		bin := top["usr/local/bin/switchyard"]
		if bin == nil || bin.Mode != 0o755 || bin.Uid != 0 || bin.ModTime.Unix() != 1700000000 {
			t.Errorf("binary entry %+v", bin)
		}
		for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/", "uploads/"} {
			if h := top[d]; h == nil || h.Typeflag != tar.TypeDir {
				t.Errorf("directory %s missing", d)
			}
		}
		if h := top["agnhost-2"]; h == nil || h.Linkname != "agnhost" {
			t.Errorf("symlink %+v", h)
		}
	}
}

func TestReproducible(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	a, _ := buildArchive(t, t.TempDir())
	b, _ := buildArchive(t, t.TempDir())
	digest := func(p string) v1.Hash {
		img, err := tarball.ImageFromPath(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if da, db := digest(a), digest(b); da != db {
		t.Errorf("two builds of the same inputs differ: %s vs %s", da, db)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"-o", filepath.Join(dir, "x.tar")},                                            // no tag, no layer
		{"-o", filepath.Join(dir, "x.tar"), "-tag", "a:b", "-dir", "relative"},         // not absolute
		{"-o", filepath.Join(dir, "x.tar"), "-tag", "a:b", "-dir", "/x/../../etc"},     // escapes
		{"-o", filepath.Join(dir, "x.tar"), "-tag", "a:b", "-file", "/nonexistent:/x"}, // missing source
		{"-o", filepath.Join(dir, "x.tar"), "-tag", "a:b", "-dir", "/d", "-entrypoint", "/bin/sh"},
		{"-o", filepath.Join(dir, "x.tar"), "-tag", "UPPER/case:tag", "-dir", "/d"},
		{"-o", filepath.Join(dir, "x.tar"), "-tag", "a:b", "-layer", filepath.Join(dir, "none.tar")},
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}
