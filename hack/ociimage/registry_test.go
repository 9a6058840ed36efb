package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// readTree unpacks a layer tar into path -> content (files only) and checks
// every file's parent directory comes before it.
func readTree(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(data))
	files, dirs := map[string][]byte{}, map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(h.Name, "/")
		if parent := name[:max(strings.LastIndex(name, "/"), 0)]; parent != "" && !dirs[parent] {
			t.Errorf("%s comes before its directory %s", name, parent)
		}
		if h.Typeflag == tar.TypeDir {
			dirs[name] = true
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
}

func TestRegistryLayer(t *testing.T) {
	dir := t.TempDir()
	archive, _ := buildArchive(t, dir)
	layer := filepath.Join(dir, "registry.tar")
	if err := run([]string{"registry", "-i", archive, "-image", "pause", "-tag", "testing", "-o", layer}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(layer)
	if err != nil {
		t.Fatal(err)
	}
	files := readTree(t, data)
	const base = "var/registry/pause/"
	digest := strings.TrimSpace(string(files[base+"manifests/testing"]))
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("tag file holds %q, want a digest", digest)
	}
	manifest := blobAt(t, files, base+"manifests", digest)
	var m v1.Manifest
	if err := json.Unmarshal(manifest, &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType == "" {
		t.Error("manifest has no mediaType: the server sends it as Content-Type")
	}
	blobAt(t, files, base+"blobs", m.Config.Digest.String())
	for _, l := range m.Layers {
		blobAt(t, files, base+"blobs", l.Digest.String())
	}
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := RegistryLayer(&again, img, "pause", "testing", time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, again.Bytes()) {
		t.Error("two runs gave different layers")
	}
}

// blobAt returns the file fake-registry-server serves for digest under
// dir, checking its content hashes to the digest.
func blobAt(t *testing.T, files map[string][]byte, dir, digest string) []byte {
	t.Helper()
	hexd := strings.TrimPrefix(digest, "sha256:")
	p := dir + "/sha256/" + hexd[:2] + "/" + hexd + "/data"
	b, ok := files[p]
	if !ok {
		t.Fatalf("no %s", p)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexd {
		t.Errorf("%s does not hash to its digest", p)
	}
	return b
}
