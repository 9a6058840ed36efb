package sysctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Interface reads and writes integer parameters by name.
type Interface interface {
	Get(name string) (int, error)
	Set(name string, value int) error
}

// Dir is an Interface over the files of one directory: each name is a path
// below it.
type Dir string

// The directories the daemon writes into.
const (
	// Proc holds the sysctls (net/netfilter/nf_conntrack_max, ...).
	Proc Dir = "/proc/sys"
	// ConntrackModule holds nf_conntrack's module parameters (hashsize),
	// which are machine-wide, not per network namespace.
	ConntrackModule Dir = "/sys/module/nf_conntrack/parameters"
)

// Get reads name as a decimal integer.
func (d Dir) Get(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(string(d), name))
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", filepath.Join(string(d), name), err)
	}
	return v, nil
}

// Set writes value to name.
func (d Dir) Set(name string, value int) error {
	return os.WriteFile(filepath.Join(string(d), name), []byte(strconv.Itoa(value)), 0o640)
}

// Ensure sets name to value unless it already holds it, and reports
// whether it wrote.
func Ensure(s Interface, name string, value int) (bool, error) {
	if cur, err := s.Get(name); err == nil && cur == value {
		return false, nil
	}
	if err := s.Set(name, value); err != nil {
		return false, err
	}
	return true, nil
}
