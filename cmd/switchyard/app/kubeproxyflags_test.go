package app

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// notYetImplemented are kube-proxy flags switchyard does not register yet
// (none since local-traffic detection landed). Add a flag here only with a
// reason; the test fails if one listed here is registered.
var notYetImplemented []string

// TestKubeProxyFlags: every flag of kube-proxy v1.37.1's --help (the
// reviewed list in testdata) is a switchyard flag, so a DaemonSet's
// command line carries over.
func TestKubeProxyFlags(t *testing.T) {
	f, err := os.Open("testdata/kube-proxy-v1.37.1-flags.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs := newCommand(nil, func(string) {}).Flags()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		name := strings.TrimSpace(sc.Text())
		if name == "" || strings.HasPrefix(name, "#") || name == "help" || name == "version" {
			continue // cobra adds --help and --version at execution
		}
		n++
		registered := fs.Lookup(name) != nil
		gap := slices.Contains(notYetImplemented, name)
		switch {
		case !registered && !gap:
			t.Errorf("kube-proxy flag --%s is not a switchyard flag", name)
		case registered && gap:
			t.Errorf("--%s is registered now: remove it from notYetImplemented", name)
		}
	}
	if err := sc.Err(); err != nil || n < 50 {
		t.Fatalf("read %d flags (%v): the list is broken", n, err)
	}
}
