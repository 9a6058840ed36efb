package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// runIndex is `ociimage index`: the top-level command's flags, once per
// -arch, into one oci-archive holding an image index. A -layer, -file or
// -sbom value written ARCH=VALUE applies to that architecture only; any
// other applies to all.
func runIndex(args []string) error {
	fs := newFlagSet("ociimage index")
	var arches, tags, layers, files, dirs, links, env, sboms multi
	out := fs.String("o", "", "output oci-archive")
	entrypoint := fs.String("entrypoint", "", `entrypoint, a JSON array ("" for none)`)
	cmd := fs.String("cmd", "", `command, a JSON array ("" for none)`)
	fs.Var(&arches, "arch", "architecture (GOARCH name) to build, in index order (repeatable)")
	fs.Var(&tags, "tag", "image name:tag (exactly one)")
	fs.Var(&layers, "layer", "[ARCH=]base layer tar file, bottom first (repeatable)")
	fs.Var(&files, "file", "[ARCH=]SRC:DST[:MODE] host file into the top layer (repeatable)")
	fs.Var(&dirs, "dir", "PATH[:MODE] empty directory in the top layer (repeatable)")
	fs.Var(&links, "symlink", "LINK:TARGET symlink in the top layer (repeatable)")
	fs.Var(&env, "env", "KEY=VALUE added after PATH (repeatable)")
	fs.Var(&sboms, "sbom", "ARCH=FILE SPDX JSON attached to that architecture's image (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || len(arches) == 0 || len(tags) != 1 || fs.NArg() > 0 {
		return fmt.Errorf("index: want -o, one -tag, at least one -arch and no positional arguments")
	}
	if _, err := name.NewTag(tags[0], name.StrictValidation); err != nil {
		return fmt.Errorf("tag %q: %w", tags[0], err)
	}
	var images []PlatformImage
	for _, arch := range arches {
		spec, err := specFrom(tags, forArch(layers, arch, arches), forArch(files, arch, arches), dirs, links, env, *entrypoint, *cmd)
		if err != nil {
			return err
		}
		spec.Arch, spec.OCI = arch, true
		pi, err := platformImage(spec, forArch(sboms, arch, arches))
		if err != nil {
			return fmt.Errorf("%s: %w", arch, err)
		}
		images = append(images, pi)
	}
	return writeIndex(*out, images, tags[0])
}

func platformImage(spec Spec, sboms []string) (PlatformImage, error) {
	img, err := Build(spec)
	if err != nil {
		return PlatformImage{}, err
	}
	pi := PlatformImage{Image: img}
	switch len(sboms) {
	case 0:
	case 1:
		if pi.SBOM, err = os.ReadFile(sboms[0]); err != nil {
			return pi, err
		}
		if _, err := ValidateSBOM(pi.SBOM); err != nil {
			return pi, fmt.Errorf("%s: %w", sboms[0], err)
		}
	default:
		return pi, fmt.Errorf("more than one -sbom")
	}
	return pi, nil
}

func writeIndex(out string, images []PlatformImage, ref string) error {
	ix, err := BuildIndex(images)
	if err != nil {
		return err
	}
	mtime, err := sourceDate()
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := ix.WriteArchive(f, ref, mtime); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// forArch keeps the values that apply to arch: those without an ARCH=
// prefix naming one of arches, and those with arch's, prefix removed.
func forArch(vals multi, arch string, arches multi) multi {
	var out multi
	for _, v := range vals {
		prefix, rest, found := strings.Cut(v, "=")
		switch {
		case !found || !contains(arches, prefix):
			out = append(out, v)
		case prefix == arch:
			out = append(out, rest)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
