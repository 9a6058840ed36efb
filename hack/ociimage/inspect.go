package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/spdx/tools-golang/json"
)

// runSBOM is `ociimage sbom`: write one architecture's SPDX JSON SBOM.
func runSBOM(args []string) error {
	fs := newFlagSet("ociimage sbom")
	var in SBOMInput
	out := fs.String("o", "", "output SPDX JSON file")
	fs.StringVar(&in.Image, "image", "", "image name:tag")
	fs.StringVar(&in.Arch, "arch", "", "architecture (amd64, arm64)")
	fs.StringVar(&in.Binary, "binary", "", "the Go binary (host path)")
	fs.StringVar(&in.BinaryPath, "binary-path", "/usr/local/bin/switchyard", "its path in the image")
	fs.StringVar(&in.Rootfs, "rootfs", "", "root filesystem tar holding var/lib/dpkg/status")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || in.Image == "" || in.Arch == "" || in.Binary == "" || in.Rootfs == "" || fs.NArg() > 0 {
		return fmt.Errorf("sbom: want -o, -image, -arch, -binary and -rootfs")
	}
	var err error
	if in.Created, err = sourceDate(); err != nil {
		return err
	}
	doc, err := BuildSBOM(in)
	if err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := json.Write(doc, f, json.Indent(" "), json.EscapeHTML(false)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runCheck is `ociimage check ARCHIVE`: verify an oci-archive from
// `ociimage index` (every blob hashes to its name, the wanted platforms are
// there, each has a valid SBOM whose subject it is) and print a summary.
func runCheck(args []string, w io.Writer) error {
	fs := newFlagSet("ociimage check")
	want := fs.String("platforms", "linux/amd64,linux/arm64", "platforms the index must list")
	sbomDir := fs.String("sbom-dir", "", "also write each SBOM there as <os>-<arch>.spdx.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("check: want one archive")
	}
	l, err := readLayoutFile(fs.Arg(0))
	if err != nil {
		return err
	}
	sum, err := Summarize(l)
	if err != nil {
		return err
	}
	fmt.Fprint(w, sum.String())
	for _, p := range strings.Split(*want, ",") {
		pl, ok := sum.Platforms[p]
		if !ok {
			return fmt.Errorf("%s: no image for %s", fs.Arg(0), p)
		}
		if pl.SBOM == nil {
			return fmt.Errorf("%s: the %s image has no SBOM", fs.Arg(0), p)
		}
		if *sbomDir != "" {
			if err := os.WriteFile(*sbomDir+"/"+strings.ReplaceAll(p, "/", "-")+".spdx.json", pl.SBOM, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// runExtract is `ociimage extract -arch ARCH ARCHIVE`: the flattened file
// system of one architecture's image, as a tar on stdout.
func runExtract(args []string, w io.Writer) error {
	fs := newFlagSet("ociimage extract")
	platform := fs.String("platform", "linux/"+hostGOARCH(), "platform to extract")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("extract: want one archive")
	}
	l, err := readLayoutFile(fs.Arg(0))
	if err != nil {
		return err
	}
	sum, err := Summarize(l)
	if err != nil {
		return err
	}
	pl, ok := sum.Platforms[*platform]
	if !ok {
		return fmt.Errorf("%s: no image for %s", fs.Arg(0), *platform)
	}
	img, err := l.Image(pl.Manifest)
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	_, err = io.Copy(w, rc)
	return err
}

func readLayoutFile(p string) (*Layout, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadLayout(f)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
