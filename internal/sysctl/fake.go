package sysctl

import (
	"fmt"
	"io/fs"
	"maps"
)

// Fake is an in-memory Interface. Names it does not hold fail as a missing
// /proc/sys file would; names in ReadOnly fail to write as under a
// read-only mount. Writes records every successful write, in order.
type Fake struct {
	Values   map[string]int
	ReadOnly map[string]bool
	Writes   []string
}

// NewFake returns a Fake holding values (copied).
func NewFake(values map[string]int) *Fake {
	return &Fake{Values: maps.Clone(values), ReadOnly: map[string]bool{}}
}

// Get returns the value of name.
func (f *Fake) Get(name string) (int, error) {
	v, ok := f.Values[name]
	if !ok {
		return 0, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return v, nil
}

// Set stores value under name.
func (f *Fake) Set(name string, value int) error {
	if _, ok := f.Values[name]; !ok {
		return &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if f.ReadOnly[name] {
		return &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	f.Values[name] = value
	f.Writes = append(f.Writes, fmt.Sprintf("%s=%d", name, value))
	return nil
}
