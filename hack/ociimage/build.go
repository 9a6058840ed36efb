package main

import (
	"fmt"
	"runtime"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// defaultPath is the PATH of images that set none (Debian's root PATH).
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Build assembles the image a Spec describes.
func Build(s Spec) (v1.Image, error) {
	var layers []v1.Layer
	var opts []tarball.LayerOption
	if s.OCI {
		opts = append(opts, tarball.WithMediaType(types.OCILayer))
	}
	for _, f := range s.BaseLayers {
		l, err := tarball.LayerFromFile(f, opts...)
		if err != nil {
			return nil, fmt.Errorf("base layer %s: %w", f, err)
		}
		layers = append(layers, l)
	}
	if len(s.Entries) > 0 {
		l, err := entriesLayer(s.Entries, s.Created, opts...)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	if len(layers) == 0 {
		return nil, fmt.Errorf("no layers: give -layer or -file/-dir/-symlink")
	}
	base := empty.Image
	if s.OCI {
		base = mutate.MediaType(base, types.OCIManifestSchema1)
		base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	}
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		return nil, err
	}
	return withConfig(img, s)
}

func withConfig(img v1.Image, s Spec) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", s.Arch
	if cf.Architecture == "" {
		cf.Architecture = runtime.GOARCH
	}
	cf.Config.Entrypoint, cf.Config.Cmd = s.Entrypoint, s.Cmd
	cf.Config.Env = append([]string{defaultPath}, s.Env...)
	cf.Config.WorkingDir = s.WorkingDir
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: s.Created})
}

// Write stores img under every tag in one docker-archive tarball.
func Write(out string, img v1.Image, tags []string) error {
	if len(tags) == 0 {
		return fmt.Errorf("no -tag given")
	}
	refs := map[name.Reference]v1.Image{}
	for _, t := range tags {
		ref, err := name.NewTag(t, name.StrictValidation)
		if err != nil {
			return fmt.Errorf("tag %q: %w", t, err)
		}
		refs[ref] = img
	}
	return tarball.MultiRefWriteToFile(out, refs)
}
