package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const dpkgStatus = `Package: base-files
Status: install ok installed
Architecture: ARCH
Maintainer: Santiago Vila <sanvila@debian.org>
Version: 12.4+deb12u13
Description: Debian base system miscellaneous files
 continued description: with a colon

Package: iptables
Status: install ok installed
Architecture: ARCH
Maintainer: Debian Netfilter Packaging Team <pkg-netfilter-team@lists.alioth.debian.org>
Source: iptables (1.8.9-2)
Version: 1.8.9-2

Package: removed-one
Status: deinstall ok config-files
Architecture: ARCH
Version: 1.0

Package: tzdata
Status: install ok installed
Architecture: all
Version: 2:2025b-0+deb12u2
`

// buildIndexArchive runs `ociimage sbom` and `ociimage index` for amd64 and
// arm64 in dir, the test binary standing in for the daemon (it has Go build
// info), and returns the archive's path.
func buildIndexArchive(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"index", "-o", filepath.Join(dir, "index.tar"), "-tag", "localhost/switchyard:v1",
		"-entrypoint", `["/usr/local/bin/switchyard"]`, "-dir", "/var/lib/switchyard"}
	for _, arch := range []string{"amd64", "arm64"} {
		rootfs := filepath.Join(dir, "rootfs-"+arch+".tar")
		writeTar(t, rootfs, map[string]string{
			"./var/lib/dpkg/status": strings.ReplaceAll(dpkgStatus, "ARCH", arch),
			"./usr/lib/os-release":  "ID=debian\nVERSION_ID=\"12\"\n",
			"./etc/" + arch:         arch,
		})
		sbom := filepath.Join(dir, arch+".spdx.json")
		if err := run([]string{"sbom", "-o", sbom, "-image", "localhost/switchyard:v1", "-arch", arch,
			"-binary", self, "-rootfs", rootfs}); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-arch", arch, "-layer", arch+"="+rootfs, "-sbom", arch+"="+sbom,
			"-file", arch+"="+self+":/usr/local/bin/switchyard:0755")
	}
	if err := run(args); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "index.tar")
}

func TestIndexStructure(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	l, err := readLayoutFile(buildIndexArchive(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(l.files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", got)
	}
	top, idx, err := l.Top()
	if err != nil {
		t.Fatal(err)
	}
	for _, ann := range []string{annRefName, annContainerdName} {
		if top.Annotations[ann] != "localhost/switchyard:v1" {
			t.Errorf("index.json annotation %s = %q", ann, top.Annotations[ann])
		}
	}
	// Images first, in -arch order, then the SBOM artifacts.
	var kinds []string
	for _, d := range idx.Manifests {
		kinds = append(kinds, d.Platform.OS+"/"+d.Platform.Architecture+":"+d.ArtifactType)
	}
	want := "linux/amd64: linux/arm64: unknown/unknown:application/spdx+json unknown/unknown:application/spdx+json"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("index lists %s\nwant %s", got, want)
	}
	for i, d := range idx.Manifests[:2] {
		checkPlatformImage(t, l, d)
		sbom, err := l.Manifest(idx.Manifests[2+i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		if sbom.Subject == nil || sbom.Subject.Digest != d.Digest || sbom.Config.MediaType != emptyConfigType {
			t.Errorf("SBOM artifact %d: subject %+v config %s, want subject %s", i, sbom.Subject, sbom.Config.MediaType, d.Digest)
		}
	}
	sum, err := Summarize(l)
	if err != nil {
		t.Fatal(err)
	}
	arm := sum.Platforms["linux/arm64"]
	if arm == nil || arm.Counts.Debian != 3 || arm.Counts.GoModules == 0 {
		t.Fatalf("arm64 summary %+v", arm)
	}
	if !bytes.Contains(arm.SBOM, []byte("pkg:deb/debian/tzdata@2%3A2025b-0+deb12u2?arch=all&distro=debian-12")) {
		t.Error("SBOM lacks tzdata's purl (epoch escaped, distro from os-release)")
	}
	if bytes.Contains(arm.SBOM, []byte("removed-one")) {
		t.Error("SBOM lists a package that is not installed")
	}
}

// checkPlatformImage checks one image of the index: OCI media types
// throughout, the config's architecture equal to the index's platform,
// the rootfs layer below the top layer.
func checkPlatformImage(t *testing.T, l *Layout, d v1.Descriptor) {
	t.Helper()
	img, err := l.Image(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 2 {
		t.Fatalf("%s: manifest %s config %s, %d layers", d.Platform.Architecture, m.MediaType, m.Config.MediaType, len(m.Layers))
	}
	for _, ld := range m.Layers {
		if ld.MediaType != types.OCILayer {
			t.Errorf("layer media type %s", ld.MediaType)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != d.Platform.Architecture || cf.OS != "linux" || cf.Created.Unix() != 1700000000 {
		t.Errorf("config %s/%s created %v, index says %s", cf.OS, cf.Architecture, cf.Created, d.Platform.Architecture)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := layerHeaders(t, layers[0])["./etc/"+cf.Architecture]; !ok {
		t.Errorf("%s image has another architecture's rootfs", cf.Architecture)
	}
	if h := layerHeaders(t, layers[1])["usr/local/bin/switchyard"]; h == nil || h.Mode != 0o755 {
		t.Errorf("daemon entry %+v", h)
	}
}

func TestIndexReproducible(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	a, err := os.ReadFile(buildIndexArchive(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(buildIndexArchive(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same inputs gave different archives")
	}
}

func TestValidateSBOMRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"not json":          `{`,
		"dangling relation": `{"spdxVersion":"SPDX-2.3","dataLicense":"CC0-1.0","SPDXID":"SPDXRef-DOCUMENT","name":"x","documentNamespace":"https://x/y","creationInfo":{"creators":["Tool: t"],"created":"2023-11-14T22:13:20Z"},"packages":[{"name":"a","SPDXID":"SPDXRef-a","downloadLocation":"NOASSERTION"}],"relationships":[{"spdxElementId":"SPDXRef-DOCUMENT","relatedSpdxElement":"SPDXRef-b","relationshipType":"DESCRIBES"}]}`,
		"no namespace":      `{"spdxVersion":"SPDX-2.3","dataLicense":"CC0-1.0","SPDXID":"SPDXRef-DOCUMENT","name":"x","creationInfo":{"creators":["Tool: t"],"created":"2023-11-14T22:13:20Z"},"packages":[{"name":"a","SPDXID":"SPDXRef-a","downloadLocation":"NOASSERTION"}],"relationships":[{"spdxElementId":"SPDXRef-DOCUMENT","relatedSpdxElement":"SPDXRef-a","relationshipType":"DESCRIBES"}]}`,
		"bad created":       `{"spdxVersion":"SPDX-2.3","dataLicense":"CC0-1.0","SPDXID":"SPDXRef-DOCUMENT","name":"x","documentNamespace":"https://x/y","creationInfo":{"creators":["Tool: t"],"created":"yesterday"},"packages":[{"name":"a","SPDXID":"SPDXRef-a","downloadLocation":"NOASSERTION"}],"relationships":[{"spdxElementId":"SPDXRef-DOCUMENT","relatedSpdxElement":"SPDXRef-a","relationshipType":"DESCRIBES"}]}`,
	} {
		if _, err := ValidateSBOM([]byte(doc)); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}

func TestIndexBadInput(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "rootfs.tar")
	writeTar(t, base, map[string]string{"etc/x": "x"})
	bad := filepath.Join(dir, "bad.spdx.json")
	if err := os.WriteFile(bad, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "x.tar")
	for _, args := range [][]string{
		{"index", "-o", out, "-tag", "a:b", "-layer", base},                                                // no -arch
		{"index", "-o", out, "-arch", "amd64", "-layer", base},                                             // no tag
		{"index", "-o", out, "-tag", "a:b", "-tag", "c:d", "-arch", "amd64", "-layer", base},               // two tags
		{"index", "-o", out, "-tag", "a:b", "-arch", "amd64", "-layer", base, "-sbom", "amd64=" + bad},     // invalid SBOM
		{"index", "-o", out, "-tag", "a:b", "-arch", "amd64", "-arch", "arm64", "-layer", "amd64=" + base}, // arm64 has no layer
	} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}
