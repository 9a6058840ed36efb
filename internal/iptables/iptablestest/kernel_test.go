package iptablestest

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// The kernel test replays the fake's strictness cases against real
// iptables (both modes) in a network namespace it creates and deletes, to
// keep the fake honest: real iptables must reject what the fake rejects,
// except where a case says the fake is deliberately stricter. Needs root
// and SWITCHYARD_KERNEL_TESTS=1.
func TestKernelAgreesWithFake(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			r, err := runner.New(runner.Options{Mode: mode, Netns: kerneltest.NewNetns(t, "sy-fake-"+mode[:3])})
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
