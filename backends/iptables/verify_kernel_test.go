package iptables

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/backends/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// verifyServicesEnv sets how many services TestVerifyKernel programs
// (default 1000; 10000 measures the cost at scale).
const verifyServicesEnv = "SWITCHYARD_VERIFY_SERVICES"

// TestVerifyKernel measures what verification costs on a real table and
// proves it heals real operator mistakes: after `iptables -t nat -F
// KUBE-SVC-...` (one service, its KUBE-SERVICES rule kept), `-F
// KUBE-SERVICES` or `iptables -t nat -F`, the next periodic sync is full
// and restores every rule.
func TestVerifyKernel(t *testing.T) {
	kerneltest.Require(t)
	n := 1000
	if v, err := strconv.Atoi(os.Getenv(verifyServicesEnv)); err == nil && v > 0 {
		n = v
	}
	// Nothing but this test writes to its namespace: a private xtables
	// lock keeps iptables-legacy clear of other users of the host's
	// /run/xtables.lock (iptables 1.8.9 honours XTABLES_LOCKFILE).
	t.Setenv("XTABLES_LOCKFILE", filepath.Join(t.TempDir(), "xtables.lock"))
	for _, mode := range kernelModes() {
		t.Run(mode, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "syipt-"+"verify")
			b := newKernelBackend(t, *testConfig(), mode, ns)
			st := bigState(n, 10)
			start := time.Now()
			mustSync(t, b, st, fullDiff())
			t.Logf("%s: full sync of %d services x 10 endpoints: %v", mode, n, time.Since(start).Round(time.Millisecond))
			start = time.Now()
			if res := mustSync(t, b, st, periodicDiff()); res.Full {
				t.Fatalf("periodic sync of intact tables was full")
			}
			t.Logf("%s: periodic sync with verification (%d services): %v", mode, n, time.Since(start).Round(time.Millisecond))
			want := countRules(t, b, "nat", chainServices)
			svcChain := firstServiceChain(t, b)
			wantSvc := countRules(t, b, "nat", svcChain)
			for _, tamper := range [][]string{{"-t", "nat", "-F", svcChain}, {"-t", "nat", "-F", chainServices}, {"-t", "nat", "-F"}} {
				nsRun(t, ns, append([]string{iptablesBin(mode, runner.IPv4, "")}, tamper...)...)
				start = time.Now()
				if res := mustSync(t, b, st, periodicDiff()); !res.Full {
					t.Fatalf("periodic sync after iptables %v stayed partial", tamper)
				}
				t.Logf("%s: iptables %v healed by the next periodic sync in %v", mode, tamper, time.Since(start).Round(time.Millisecond))
				if got := countRules(t, b, "nat", chainServices); got != want {
					t.Errorf("after iptables %v: KUBE-SERVICES holds %d rules, want %d", tamper, got, want)
				}
				if got := countRules(t, b, "nat", svcChain); got != wantSvc {
					t.Errorf("after iptables %v: %s holds %d rules, want %d", tamper, svcChain, got, wantSvc)
				}
			}
		})
	}
}

// firstServiceChain is the KUBE-SVC chain the first KUBE-SERVICES rule
// jumps to.
func firstServiceChain(t *testing.T, b *Backend) string {
	t.Helper()
	rules, _, err := b.runner.(runner.ChainLister).ListChain(context.Background(), runner.IPv4, "nat", chainServices)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if _, target, ok := strings.Cut(r, " -j "); ok && strings.HasPrefix(target, prefixClusterPolicy) {
			return target
		}
	}
	t.Fatalf("no KUBE-SVC jump in KUBE-SERVICES: %v", rules)
	return ""
}

func countRules(t *testing.T, b *Backend, table, chain string) int {
	t.Helper()
	rules, ok, err := b.runner.(runner.ChainLister).ListChain(context.Background(), runner.IPv4, table, chain)
	if err != nil || !ok {
		t.Fatalf("list %s/%s: exists %v, %v", table, chain, ok, err)
	}
	return len(rules)
}
