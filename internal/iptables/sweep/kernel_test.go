package sweep

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// TestKernelSweep loads kube-proxy's iptables-mode rules (with kubelet's
// chains and another program's chain) into a fresh network namespace,
// in both iptables variants, sweeps, and checks with iptables-save that
// exactly the proxy's chains and jumps went.
func TestKernelSweep(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "sy-sweep")
			r, err := runner.New(runner.Options{Mode: mode, Netns: ns})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := r.Restore(ctx, runner.IPv4, []byte(kubeProxyIPTables)); err != nil {
				t.Fatalf("loading kube-proxy's rules: %v", err)
			}
			res, err := Run(ctx, r, runner.IPv4, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Chains() != 14 || res.Jumps() != 9 {
				t.Errorf("removed %d chains and %d jumps, want 14 and 9", res.Chains(), res.Jumps())
			}
			for table, want := range map[string][]string{
				"mangle": {"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"},
				"filter": {"CNI-FORWARD", "KUBE-FIREWALL", "KUBE-KUBELET-CANARY"},
				"nat":    {"KUBE-KUBELET-CANARY"},
			} {
				save, err := r.SaveTable(ctx, runner.IPv4, table)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, c := range runner.ParseSave(save).Chains {
					if !runner.IsBuiltinChain(c) {
						got = append(got, c)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%s: chains %v after the sweep, want %v", table, got, want)
				}
				if strings.Contains(string(save), "-j KUBE-SERVICES") || (table == "filter" && !strings.Contains(string(save), "-A INPUT -j KUBE-FIREWALL")) {
					t.Errorf("%s after the sweep:\n%s", table, save)
				}
			}
			again, err := Run(ctx, r, runner.IPv4, nil)
			if err != nil || again.Chains() != 0 || again.Jumps() != 0 {
				t.Errorf("a second sweep: %+v, %v; want nothing to do", again, err)
			}
		})
	}
}
