package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spdx/tools-golang/spdx"
	"github.com/spdx/tools-golang/spdx/v2/common"
)

// SBOMInput is what one architecture's SBOM describes: the image, the Go
// binary in it and the root filesystem tar its Debian packages came in.
type SBOMInput struct {
	Image      string // name:tag
	Arch       string // GOARCH / Debian name (amd64, arm64)
	Binary     string // host path of the daemon
	BinaryPath string // its path in the image
	Rootfs     string // root filesystem tar (mmdebstrap's)
	Created    time.Time
}

// debPackage is one installed package of dpkg's status file.
type debPackage struct {
	Name, Version, Arch, Source, Maintainer string
}

const noAssertion = "NOASSERTION"

// BuildSBOM describes in.Image as an SPDX 2.3 document: the image contains
// the daemon and every installed Debian package; the daemon statically
// links every Go module its build info names, and the Go standard library.
func BuildSBOM(in SBOMInput) (*spdx.Document, error) {
	bi, err := buildinfo.ReadFile(in.Binary)
	if err != nil {
		return nil, fmt.Errorf("go build info of %s: %w", in.Binary, err)
	}
	binSum, err := fileSHA256(in.Binary)
	if err != nil {
		return nil, err
	}
	debs, distro, err := readRootfsPackages(in.Rootfs)
	if err != nil {
		return nil, err
	}
	name, tag, _ := strings.Cut(in.Image, ":")
	doc := &spdx.Document{
		SPDXVersion: spdx.Version, DataLicense: spdx.DataLicense, SPDXIdentifier: "DOCUMENT",
		DocumentName: fmt.Sprintf("%s linux/%s", in.Image, in.Arch),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "switchyard-hack-ociimage"}},
			Created:  in.Created.UTC().Format(time.RFC3339),
		},
	}
	// A purl's OCI version is the manifest digest, which the SBOM cannot
	// know before the image exists: the tag goes in a qualifier instead.
	img := pkg("SPDXRef-Image", name, tag,
		fmt.Sprintf("pkg:oci/%s?arch=%s&repository_url=%s&tag=%s", lastPath(name), in.Arch, name, tag))
	img.PrimaryPackagePurpose = "CONTAINER"
	// A build from a work tree has no module version ("(devel)"); the
	// image's tag is the version the daemon reports (-X app.Version).
	mainVersion := bi.Main.Version
	if mainVersion == "" || mainVersion == "(devel)" {
		mainVersion = tag
	}
	daemon := pkg("SPDXRef-Go-"+sanitizeID(bi.Main.Path), bi.Main.Path, mainVersion, goPURL(bi.Main.Path, mainVersion))
	daemon.PrimaryPackagePurpose = "APPLICATION"
	daemon.PackageFileName = in.BinaryPath
	daemon.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: binSum}}
	doc.Packages = []*spdx.Package{img, daemon}
	rel(doc, "DOCUMENT", "DESCRIBES", img.PackageSPDXIdentifier)
	rel(doc, img.PackageSPDXIdentifier, "CONTAINS", daemon.PackageSPDXIdentifier)
	addGoModules(doc, daemon.PackageSPDXIdentifier, bi)
	addDebPackages(doc, img.PackageSPDXIdentifier, debs, distro)
	doc.DocumentNamespace = namespace(doc, in)
	return doc, nil
}

func addGoModules(doc *spdx.Document, daemon common.ElementID, bi *buildinfo.BuildInfo) {
	std := pkg("SPDXRef-Go-stdlib", "stdlib", bi.GoVersion, goPURL("stdlib", bi.GoVersion))
	doc.Packages = append(doc.Packages, std)
	rel(doc, daemon, "STATIC_LINK", std.PackageSPDXIdentifier)
	for _, m := range bi.Deps {
		path, version := m.Path, m.Version
		comment := ""
		if m.Replace != nil {
			comment = fmt.Sprintf("replaced by %s %s", m.Replace.Path, m.Replace.Version)
			path, version = m.Replace.Path, m.Replace.Version
		}
		p := pkg("SPDXRef-Go-"+sanitizeID(m.Path), m.Path, version, goPURL(path, version))
		p.PackageComment = comment
		doc.Packages = append(doc.Packages, p)
		rel(doc, daemon, "STATIC_LINK", p.PackageSPDXIdentifier)
	}
}

func addDebPackages(doc *spdx.Document, image common.ElementID, debs []debPackage, distro string) {
	for _, d := range debs {
		purl := fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", d.Name, strings.ReplaceAll(d.Version, ":", "%3A"), d.Arch)
		if distro != "" {
			purl += "&distro=" + distro
		}
		p := pkg("SPDXRef-Deb-"+sanitizeID(d.Name+"-"+d.Arch), d.Name, d.Version, purl)
		p.PackageSupplier = &common.Supplier{SupplierType: "Organization", Supplier: "Debian"}
		p.PackageOriginator = originator(d.Maintainer)
		if d.Source != "" {
			p.PackageSourceInfo = "built from the Debian source package " + d.Source
		}
		doc.Packages = append(doc.Packages, p)
		rel(doc, image, "CONTAINS", p.PackageSPDXIdentifier)
	}
}

// originator is a Debian Maintainer field ("Name <email>") as SPDX writes
// one ("Person: Name (email)"); a team is an organization.
func originator(maintainer string) *common.Originator {
	if maintainer == "" {
		return nil
	}
	kind := "Person"
	if strings.Contains(maintainer, "Team") || strings.Contains(maintainer, "Maintainers") {
		kind = "Organization"
	}
	m := strings.NewReplacer("<", "(", ">", ")").Replace(maintainer)
	return &common.Originator{OriginatorType: kind, Originator: m}
}

// pkg is a package with what SPDX 2.3 requires and nothing asserted about
// licenses (neither Go's build info nor dpkg's status records them).
func pkg(id, name, version, purl string) *spdx.Package {
	return &spdx.Package{
		PackageSPDXIdentifier:   common.ElementID(strings.TrimPrefix(id, "SPDXRef-")),
		PackageName:             name,
		PackageVersion:          version,
		PackageDownloadLocation: noAssertion,
		PackageLicenseConcluded: noAssertion,
		PackageLicenseDeclared:  noAssertion,
		PackageCopyrightText:    noAssertion,
		PackageExternalReferences: []*spdx.PackageExternalReference{
			{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: purl},
		},
	}
}

func rel(doc *spdx.Document, a common.ElementID, kind string, b common.ElementID) {
	doc.Relationships = append(doc.Relationships, &spdx.Relationship{
		RefA: common.MakeDocElementID("", string(a)), RefB: common.MakeDocElementID("", string(b)), Relationship: kind,
	})
}

func goPURL(path, version string) string { return "pkg:golang/" + path + "@" + version }

func lastPath(name string) string { return name[strings.LastIndex(name, "/")+1:] }

var notIDChar = regexp.MustCompile(`[^A-Za-z0-9.-]`)

// sanitizeID makes s fit an SPDX identifier ([A-Za-z0-9.-]).
func sanitizeID(s string) string {
	return notIDChar.ReplaceAllStringFunc(s, func(c string) string {
		if c == "+" {
			return "plus"
		}
		return "-"
	})
}

// namespace is a URI unique to this document's content, so equal inputs
// give an equal document (a random UUID would not).
func namespace(doc *spdx.Document, in SBOMInput) string {
	h := sha256.New()
	for _, p := range doc.Packages {
		fmt.Fprintf(h, "%s %s %s\n", p.PackageSPDXIdentifier, p.PackageName, p.PackageVersion)
	}
	return fmt.Sprintf("https://github.com/switchyard-proxy/switchyard/spdx/%s/linux-%s-%x",
		strings.ReplaceAll(in.Image, ":", "-"), in.Arch, h.Sum(nil)[:8])
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// readRootfsPackages reads var/lib/dpkg/status and the distribution's
// purl qualifier (debian-<VERSION_ID>) from a root filesystem tar.
func readRootfsPackages(rootfs string) ([]debPackage, string, error) {
	f, err := os.Open(rootfs)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	var status, osRelease []byte
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", rootfs, err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "var/lib/dpkg/status":
			status, err = io.ReadAll(tr)
		case "usr/lib/os-release":
			osRelease, err = io.ReadAll(tr)
		}
		if err != nil {
			return nil, "", err
		}
	}
	if status == nil {
		return nil, "", fmt.Errorf("%s has no var/lib/dpkg/status", rootfs)
	}
	distro := ""
	if id := stanzaValue(osRelease, "VERSION_ID="); id != "" {
		distro = "debian-" + strings.Trim(id, `"`)
	}
	return parseDpkgStatus(status), distro, nil
}

func stanzaValue(b []byte, prefix string) string {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// parseDpkgStatus returns the installed packages of a dpkg status file,
// in its order (dpkg keeps it sorted by name).
func parseDpkgStatus(b []byte) []debPackage {
	var out []debPackage
	for _, stanza := range strings.Split(string(b), "\n\n") {
		fields := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader([]byte(stanza)))
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && !strings.HasPrefix(k, " ") {
				fields[k] = strings.TrimSpace(v)
			}
		}
		if fields["Package"] == "" || !strings.HasSuffix(fields["Status"], " installed") {
			continue
		}
		src, _, _ := strings.Cut(fields["Source"], " ")
		out = append(out, debPackage{Name: fields["Package"], Version: fields["Version"], Arch: fields["Architecture"],
			Source: src, Maintainer: fields["Maintainer"]})
	}
	return out
}
