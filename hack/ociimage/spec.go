package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Spec is one image to build.
type Spec struct {
	Tags       []string
	BaseLayers []string // tar files (plain or gzip), bottom first
	Entries    []Entry  // the top layer
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	Created    time.Time
	// Arch is the image config's architecture (GOARCH names; default: this
	// machine's).
	Arch string
	// OCI selects OCI media types (manifest, config, layers), as an image
	// index needs; otherwise Docker's, as a docker-archive has.
	OCI bool
}

// EntryKind is what an Entry creates in the top layer.
type EntryKind int

const (
	// File copies a host file.
	File EntryKind = iota
	// Dir creates an empty directory.
	Dir
	// Symlink creates a symbolic link.
	Symlink
)

// Entry is one path of the generated top layer.
type Entry struct {
	Kind   EntryKind
	Path   string // absolute path in the image
	Source string // File: host path; Symlink: link target
	Data   []byte // File: the content itself, instead of Source
	Mode   int64
}

// parseFile reads "SRC:DST[:MODE]" (MODE octal; default: the source's mode).
func parseFile(s string) (Entry, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
		return Entry{}, fmt.Errorf("-file %q: want SRC:DST[:MODE]", s)
	}
	e := Entry{Kind: File, Source: parts[0], Path: parts[1]}
	if len(parts) == 3 {
		m, err := strconv.ParseInt(parts[2], 8, 32)
		if err != nil {
			return Entry{}, fmt.Errorf("-file %q: mode: %w", s, err)
		}
		e.Mode = m
	} else {
		fi, err := os.Stat(e.Source)
		if err != nil {
			return Entry{}, fmt.Errorf("-file %q: %w", s, err)
		}
		e.Mode = int64(fi.Mode().Perm())
	}
	return e, checkPath(e.Path)
}

// parseDir reads "PATH[:MODE]" (default 0755).
func parseDir(s string) (Entry, error) {
	p, m, found := strings.Cut(s, ":")
	e := Entry{Kind: Dir, Path: p, Mode: 0o755}
	if found {
		v, err := strconv.ParseInt(m, 8, 32)
		if err != nil {
			return Entry{}, fmt.Errorf("-dir %q: mode: %w", s, err)
		}
		e.Mode = v
	}
	return e, checkPath(e.Path)
}

// parseSymlink reads "LINK:TARGET".
func parseSymlink(s string) (Entry, error) {
	link, target, found := strings.Cut(s, ":")
	if !found || target == "" {
		return Entry{}, fmt.Errorf("-symlink %q: want LINK:TARGET", s)
	}
	return Entry{Kind: Symlink, Path: link, Source: target, Mode: 0o777}, checkPath(link)
}

func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") || p == "/" || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return fmt.Errorf("image path %q: want an absolute path below /", p)
	}
	return nil
}

// parseArgv reads a JSON array of strings ("" means none).
func parseArgv(flag, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("-%s %q: want a JSON array of strings: %w", flag, s, err)
	}
	return v, nil
}

// sourceDate is SOURCE_DATE_EPOCH as a time (the Unix epoch when unset).
func sourceDate() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
