package main

import (
	"os"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	if _, err := handler("vax"); err == nil {
		t.Error("handler(vax) succeeded")
	}
	if _, err := os.Stat("/usr/lib/binfmt.d/qemu-aarch64.conf"); err != nil {
		t.Skip("qemu-user-static is not installed")
	}
	rule, err := handler("arm64")
	if err != nil {
		t.Fatal(err)
	}
	// :name:type:offset:magic:mask:interpreter:flags
	if f := strings.Split(rule, ":"); len(f) != 8 || f[1] != "qemu-aarch64" || f[2] != "M" {
		t.Errorf("rule %q", rule)
	}
}

func TestHostArchIsNative(t *testing.T) {
	// The host's own architecture must never be wrapped in a namespace.
	if a := hostArch(); qemuArch[a] == "" {
		t.Errorf("hostArch() = %q, not a Debian architecture this tool knows", a)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-arch", "arm64"}, {"--", "true"}} {
		if err := outer(args); err == nil {
			t.Errorf("outer(%q) succeeded", args)
		}
	}
}
