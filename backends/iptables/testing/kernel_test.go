package iptablestest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/iptables/runner"
)

// The kernel test replays the fake's strictness cases against real
// iptables (both modes) in a network namespace it creates and deletes, to
// keep the fake honest: real iptables must reject what the fake rejects,
// except where a case says the fake is deliberately stricter. Needs root
// and SWITCHYARD_KERNEL_TESTS=1.
func TestKernelAgreesWithFake(t *testing.T) {
	if os.Getuid() != 0 || os.Getenv("SWITCHYARD_KERNEL_TESTS") != "1" {
		t.Skip("kernel test: needs root and SWITCHYARD_KERNEL_TESTS=1")
	}
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			r, err := runner.New(runner.Options{Mode: mode, Netns: newNetns(t, mode[:3])})
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range strictCases() {
				t.Run(tc.name, func(t *testing.T) { kernelCase(t, r, mode, tc) })
			}
		})
	}
}

const resetTables = "*nat\n-F\n-X\nCOMMIT\n*filter\n-F\n-X\nCOMMIT\n"

func kernelCase(t *testing.T, r *runner.Runner, mode string, tc strictCase) {
	ctx := context.Background()
	for _, data := range []string{resetTables, base} {
		if err := r.Restore(ctx, runner.IPv4, []byte(data)); err != nil {
			t.Fatalf("setup: %v", err)
		}
	}
	before := kernelState(t, r)
	err := r.Restore(ctx, runner.IPv4, []byte(tc.data))
	if accepts := slices.Contains(tc.realAccepts, mode); accepts != (err == nil) {
		t.Fatalf("iptables (%s) returned %v; the case says it accepts: %v", mode, err, accepts)
	}
	if err != nil && kernelState(t, r) != before {
		t.Errorf("rejected restore changed the kernel's tables")
	}
}

func kernelState(t *testing.T, r *runner.Runner) string {
	t.Helper()
	var all string
	for _, tbl := range []string{"filter", "nat"} {
		out, err := r.SaveTable(context.Background(), runner.IPv4, tbl)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if len(line) > 0 && line[0] != '#' { // skip the timestamped comments
				all += line + "\n"
			}
		}
	}
	return all
}

func newNetns(t *testing.T, tag string) string {
	t.Helper()
	name := fmt.Sprintf("sy-fake-%d-%s", os.Getpid(), tag)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}
