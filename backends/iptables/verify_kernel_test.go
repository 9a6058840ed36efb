package iptables

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// verifyServicesEnv sets how many services TestVerifyKernel programs
// (default 1000; 10000 measures the cost at scale).
const verifyServicesEnv = "SWITCHYARD_VERIFY_SERVICES"

// TestVerifyKernel measures what verification costs on a real table and
// proves it heals real operator mistakes. It times a periodic sync while
// nobody else wrote, then after a foreign write that leaves switchyard's
// chains alone (nothing to repair), then after each tamper: `iptables -t
// nat -F KUBE-SVC-...` (one service, its KUBE-SERVICES rule kept), the
// same plus `-F` and `-X` of one of its KUBE-SEP chains, `-F KUBE-SERVICES` (all
// three repaired by a partial sync) and `iptables -t nat -F` (a full
// one). CPU is the process's and its children's (iptables-restore).
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
			timedSync(t, b, st, fmt.Sprintf("%s: periodic sync, untouched (%d services)", mode, n), false)
			nsRun(t, ns, iptablesBin(mode, runner.IPv4, ""), "-t", "filter", "-N", "FOREIGN-WRITER")
			timedSync(t, b, st, fmt.Sprintf("%s: periodic sync after a foreign write, rules intact", mode), false)
			want := countRules(t, b, "nat", chainServices)
			svcChain := firstServiceChain(t, b)
			wantSvc := countRules(t, b, "nat", svcChain)
			sepChain := firstJump(t, b, svcChain)
			ipt := iptablesBin(mode, runner.IPv4, "")
			for _, tc := range []struct {
				tamper   [][]string
				wantFull bool
			}{
				{[][]string{{"-t", "nat", "-F", svcChain}}, false},
				{[][]string{{"-t", "nat", "-F", svcChain}, {"-t", "nat", "-F", sepChain}, {"-t", "nat", "-X", sepChain}}, false},
				{[][]string{{"-t", "nat", "-F", chainServices}}, false},
				{[][]string{{"-t", "nat", "-F"}}, true},
			} {
				for _, args := range tc.tamper {
					nsRun(t, ns, append([]string{ipt}, args...)...)
				}
				timedSync(t, b, st, fmt.Sprintf("%s: iptables %v healed by the next periodic sync", mode, tc.tamper), tc.wantFull)
				if got := countRules(t, b, "nat", chainServices); got != want {
					t.Errorf("after iptables %v: KUBE-SERVICES holds %d rules, want %d", tc.tamper, got, want)
				}
				if got := countRules(t, b, "nat", svcChain); got != wantSvc {
					t.Errorf("after iptables %v: %s holds %d rules, want %d", tc.tamper, svcChain, got, wantSvc)
				}
				if got := countRules(t, b, "nat", sepChain); got != 2 {
					t.Errorf("after iptables %v: %s holds %d rules, want 2", tc.tamper, sepChain, got)
				}
			}
		})
	}
}

// timedSync runs a periodic sync, checks whether it was full and logs its
// wall and CPU time.
func timedSync(t *testing.T, b *Backend, st *proxier.State, what string, wantFull bool) {
	t.Helper()
	cpu0, start := kerneltest.ProcessCPU(), time.Now()
	res := mustSync(t, b, st, periodicDiff())
	t.Logf("%s: %v wall, %v CPU, full %v", what, time.Since(start).Round(time.Millisecond),
		(kerneltest.ProcessCPU() - cpu0).Round(time.Millisecond), res.Full)
	if res.Full != wantFull {
		t.Errorf("%s: full %v, want %v", what, res.Full, wantFull)
	}
}

// firstJump is the chain the first rule of chain jumps to.
func firstJump(t *testing.T, b *Backend, chain string) string {
	t.Helper()
	rules, _, err := b.runner.(runner.ChainLister).ListChain(context.Background(), runner.IPv4, "nat", chain)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if _, target, ok := strings.Cut(r, " -j "); ok && strings.HasPrefix(target, prefixEndpoint) {
			return target
		}
	}
	t.Fatalf("no KUBE-SEP jump in %s: %v", chain, rules)
	return ""
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
