package sysctl

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestDirGetSet(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "net/netfilter"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := "net/netfilter/nf_conntrack_tcp_timeout_close_wait"
	if err := os.WriteFile(filepath.Join(dir, name), []byte("60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := Dir(dir)
	if v, err := d.Get(name); err != nil || v != 60 {
		t.Fatalf("Get = %d, %v; want 60", v, err)
	}
	wrote, err := Ensure(d, name, 3600)
	if err != nil || !wrote {
		t.Fatalf("Ensure = %v, %v; want a write", wrote, err)
	}
	if v, _ := d.Get(name); v != 3600 {
		t.Fatalf("after Ensure: %d, want 3600", v)
	}
	if wrote, err := Ensure(d, name, 3600); err != nil || wrote {
		t.Fatalf("second Ensure = %v, %v; want no write", wrote, err)
	}
	if _, err := d.Get("net/missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Get of a missing name: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "garbage"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get("garbage"); err == nil {
		t.Fatal("Get of a non-integer succeeded")
	}
}

func TestFake(t *testing.T) {
	f := NewFake(map[string]int{"a": 1, "b": 2})
	f.ReadOnly["b"] = true
	if wrote, err := Ensure(f, "a", 1); err != nil || wrote {
		t.Fatalf("Ensure(a=1) = %v, %v", wrote, err)
	}
	if err := f.Set("a", 5); err != nil {
		t.Fatal(err)
	}
	if err := f.Set("b", 3); !errors.Is(err, fs.ErrPermission) {
		t.Fatalf("write to read-only b: %v", err)
	}
	if err := f.Set("c", 3); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("write to missing c: %v", err)
	}
	if len(f.Writes) != 1 || f.Writes[0] != "a=5" {
		t.Fatalf("Writes = %v", f.Writes)
	}
}
