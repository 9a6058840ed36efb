package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func newFlagSet(name string) *flag.FlagSet { return flag.NewFlagSet(name, flag.ContinueOnError) }

func run(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "registry":
			return runRegistry(args[1:])
		case "index":
			return runIndex(args[1:])
		case "sbom":
			return runSBOM(args[1:])
		case "check":
			return runCheck(args[1:], os.Stdout)
		case "extract":
			return runExtract(args[1:], os.Stdout)
		}
	}
	fs := newFlagSet("ociimage")
	var tags, layers, files, dirs, links, env multi
	out := fs.String("o", "", "output docker-archive tarball")
	entrypoint := fs.String("entrypoint", "", `entrypoint, a JSON array ("" for none)`)
	cmd := fs.String("cmd", "", `command, a JSON array ("" for none)`)
	workdir := fs.String("workdir", "", "working directory")
	fs.Var(&tags, "tag", "image name:tag (repeatable)")
	fs.Var(&layers, "layer", "base layer tar file, bottom first (repeatable)")
	fs.Var(&files, "file", "SRC:DST[:MODE] host file into the top layer (repeatable)")
	fs.Var(&dirs, "dir", "PATH[:MODE] empty directory in the top layer (repeatable)")
	fs.Var(&links, "symlink", "LINK:TARGET symlink in the top layer (repeatable)")
	fs.Var(&env, "env", "KEY=VALUE added after PATH (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("want -o OUT and no positional arguments")
	}
	spec, err := specFrom(tags, layers, files, dirs, links, env, *entrypoint, *cmd)
	if err != nil {
		return err
	}
	spec.WorkingDir = *workdir
	img, err := Build(spec)
	if err != nil {
		return err
	}
	return Write(*out, img, spec.Tags)
}

func specFrom(tags, layers, files, dirs, links, env multi, entrypoint, cmd string) (Spec, error) {
	s := Spec{Tags: tags, BaseLayers: layers, Env: env}
	var err error
	if s.Created, err = sourceDate(); err != nil {
		return s, err
	}
	if s.Entrypoint, err = parseArgv("entrypoint", entrypoint); err != nil {
		return s, err
	}
	if s.Cmd, err = parseArgv("cmd", cmd); err != nil {
		return s, err
	}
	for _, group := range []struct {
		vals  multi
		parse func(string) (Entry, error)
	}{{files, parseFile}, {dirs, parseDir}, {links, parseSymlink}} {
		for _, v := range group.vals {
			e, err := group.parse(v)
			if err != nil {
				return s, err
			}
			s.Entries = append(s.Entries, e)
		}
	}
	return s, nil
}
