package iptables

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// listingFake counts reads of the kernel's chains (ListChain, and the
// ChainUses and CountRules of the count-based verification) and can make
// them fail (a lock held past the wait, a netlink error).
type listingFake struct {
	*iptablestest.Fake
	lists   int
	listErr error
}

func (f *listingFake) ListChain(ctx context.Context, fam runner.Family, table, chain string) ([]string, bool, error) {
	f.lists++
	if f.listErr != nil {
		return nil, false, f.listErr
	}
	return f.Fake.ListChain(ctx, fam, table, chain)
}

func (f *listingFake) ChainUses(ctx context.Context, fam runner.Family) (map[string]map[string]int, error) {
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.Fake.ChainUses(ctx, fam)
}

func (f *listingFake) CountRules(ctx context.Context, fam runner.Family, table string) (*runner.TableCounts, error) {
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.Fake.CountRules(ctx, fam, table)
}

// periodicDiff is what the proxier's timer-driven sync passes: nothing
// changed, verify.
func periodicDiff() *proxier.Diff {
	return &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{}, Verify: true}
}

// wipeTable is `iptables -t TABLE -F` (every chain flushed, built-ins
// included), then with del `iptables -t TABLE -X` (every user chain gone).
func wipeTable(t *testing.T, fake *iptablestest.Fake, table string, del bool) {
	t.Helper()
	for _, c := range fake.Chains(runner.IPv4, table) {
		if err := fake.FlushChain(runner.IPv4, table, c); err != nil {
			t.Fatal(err)
		}
	}
	if !del {
		return
	}
	for _, c := range fake.Chains(runner.IPv4, table) {
		if !strings.HasPrefix(c, "KUBE-") { // built-in
			continue
		}
		if err := fake.DeleteChain(runner.IPv4, table, c); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteServiceByHand is an operator removing one service the hard way:
// its KUBE-SERVICES rule, then its KUBE-SVC chain (flushed, then -X; the
// KUBE-SEP chains it jumped to stay behind).
func deleteServiceByHand(t *testing.T, fake *iptablestest.Fake, name proxier.ServicePortName) {
	t.Helper()
	svcChain := chainsFor(name).cluster
	for _, r := range fake.Rules(runner.IPv4, "nat", chainServices) {
		if r.Jump == svcChain {
			if err := fake.DeleteRule(runner.IPv4, "nat", chainServices, r.Args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fake.FlushChain(runner.IPv4, "nat", svcChain); err != nil {
		t.Fatal(err)
	}
	if err := fake.DeleteChain(runner.IPv4, "nat", svcChain); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyRestoresTamperedRules: realistic operator mistakes, most of
// which leave the canary chains in place, are found by the next periodic
// sync, which restores exactly the rules a fresh node gets, on both
// iptables modes: with a partial sync rewriting the changed chains when
// they are a few service or top-level chains, with a full sync when a
// canary or a jump from a built-in chain is gone.
func TestVerifyRestoresTamperedRules(t *testing.T) {
	cases := []struct {
		name     string
		tamper   func(t *testing.T, f *iptablestest.Fake, names []proxier.ServicePortName)
		wantFull bool
	}{
		{"iptables -t nat -F KUBE-SERVICES", func(t *testing.T, f *iptablestest.Fake, _ []proxier.ServicePortName) {
			if err := f.FlushChain(runner.IPv4, "nat", chainServices); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"one service's rule and KUBE-SVC chain deleted", func(t *testing.T, f *iptablestest.Fake, names []proxier.ServicePortName) {
			deleteServiceByHand(t, f, names[0])
		}, false},
		{"one service's KUBE-SVC chain flushed, its KUBE-SERVICES rule kept", func(t *testing.T, f *iptablestest.Fake, names []proxier.ServicePortName) {
			if err := f.FlushChain(runner.IPv4, "nat", chainsFor(names[0]).cluster); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"one KUBE-SEP chain deleted after flushing its KUBE-SVC chain", func(t *testing.T, f *iptablestest.Fake, names []proxier.ServicePortName) {
			deleteEndpointByHand(t, f, names[0])
		}, false},
		{"iptables -t nat -F", func(t *testing.T, f *iptablestest.Fake, _ []proxier.ServicePortName) { wipeTable(t, f, "nat", false) }, true},
		{"iptables -F (filter)", func(t *testing.T, f *iptablestest.Fake, _ []proxier.ServicePortName) {
			wipeTable(t, f, "filter", false)
		}, true},
		{"iptables -t nat -F; -X", func(t *testing.T, f *iptablestest.Fake, _ []proxier.ServicePortName) { wipeTable(t, f, "nat", true) }, true},
		{"iptables -t mangle -F; -X", func(t *testing.T, f *iptablestest.Fake, _ []proxier.ServicePortName) { wipeTable(t, f, "mangle", true) }, true},
		{"jump from PREROUTING deleted", func(t *testing.T, f *iptablestest.Fake, _ []proxier.ServicePortName) {
			if err := f.DeleteRule(runner.IPv4, "nat", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", chainServices); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		for _, tc := range cases {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				fake := &listingFake{Fake: iptablestest.NewFake()}
				fake.SetMode(mode)
				b := newTestBackend(t, fake.Fake, nil)
				b.runner = fake
				st, names := partialFixture()
				mustSync(t, b, st, fullDiff())
				mustSync(t, b, st, periodicDiff())
				if n := b.repairs.Count(reconcile.KindIPTables, v1.IPv4Protocol); n != 0 {
					t.Fatalf("intact rules counted %v repairs", n)
				}
				tc.tamper(t, fake.Fake, names)
				if res := mustSync(t, b, st, periodicDiff()); res.Full != tc.wantFull {
					t.Fatalf("periodic sync after %q: full %v, want %v", tc.name, res.Full, tc.wantFull)
				}
				assertMatchesReference(t, fake.Fake, nil, st)
				if n := b.repairs.Count(reconcile.KindIPTables, v1.IPv4Protocol); n != 1 {
					t.Errorf("switchyard_rules_repaired_total{mode=iptables,kind=iptables,ip_family=IPv4} = %v, want 1", n)
				}
			})
		}
	}
}

// deleteEndpointByHand flushes a service's KUBE-SVC chain (the only
// chain jumping to its KUBE-SEP chains), then deletes its first KUBE-SEP
// chain.
func deleteEndpointByHand(t *testing.T, fake *iptablestest.Fake, name proxier.ServicePortName) {
	t.Helper()
	svcChain := chainsFor(name).cluster
	rules := fake.Rules(runner.IPv4, "nat", svcChain)
	if err := fake.FlushChain(runner.IPv4, "nat", svcChain); err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if strings.HasPrefix(r.Jump, prefixEndpoint) {
			if err := fake.FlushChain(runner.IPv4, "nat", r.Jump); err != nil {
				t.Fatal(err)
			}
			if err := fake.DeleteChain(runner.IPv4, "nat", r.Jump); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s jumps to no KUBE-SEP chain", svcChain)
}

// TestVerifyPolicy: a periodic sync of intact tables verifies and writes
// nothing; a sync with changes verifies only once the interval passed;
// listing errors never force a full sync; a negative interval disables it.
func TestVerifyPolicy(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	fake := &listingFake{Fake: iptablestest.NewFake()}
	b := newTestBackend(t, fake.Fake, func(c *Config) { c.Clock = clk; c.VerifyInterval = time.Minute })
	b.runner = fake
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	step := func(name string, d *proxier.Diff, wantLists bool, wantFull bool) {
		t.Helper()
		fake.lists = 0
		n := len(fake.Restores())
		res := mustSync(t, b, st, d)
		if (fake.lists > 0) != wantLists || res.Full != wantFull {
			t.Errorf("%s: listed %d chains, full %v; want listing %v, full %v", name, fake.lists, res.Full, wantLists, wantFull)
		}
		if !wantFull && fake.listErr == nil && len(restoresSince(fake.Fake, n)) != 0 {
			t.Errorf("%s: restores on an unchanged state", name)
		}
	}
	step("periodic sync", periodicDiff(), true, false)
	step("change, interval not passed", changedDiff(false, names[0]), false, false)
	clk.SetTime(clk.Now().Add(time.Minute))
	step("change, interval passed", changedDiff(false, names[0]), true, false)
	step("change right after a verification", changedDiff(false, names[1]), false, false)

	fake.listErr = errors.New("Another app is currently holding the xtables lock")
	if err := fake.FlushChain(runner.IPv4, "nat", chainServices); err != nil {
		t.Fatal(err)
	}
	step("periodic sync, listing fails", periodicDiff(), true, false)
	fake.listErr = nil
	// KUBE-SERVICES alone changed: a partial sync rewrites it.
	n := len(fake.Restores())
	if res := mustSync(t, b, st, periodicDiff()); res.Full || len(restoresSince(fake.Fake, n)) != 1 {
		t.Errorf("periodic sync, listing works again: full %v, %d restores; want one partial restore", res.Full, len(restoresSince(fake.Fake, n)))
	}
	assertMatchesReference(t, fake.Fake, nil, st)

	off := newTestBackend(t, fake.Fake, func(c *Config) { c.VerifyInterval = -1 })
	off.runner = fake
	mustSync(t, off, st, fullDiff())
	fake.lists = 0
	mustSync(t, off, st, periodicDiff())
	if fake.lists != 0 {
		t.Errorf("verification disabled but %d chains listed", fake.lists)
	}
}

// TestVerifyListsOnlyTopLevelChains: the number of chains listed does not
// grow with the number of services (the per-service chains are never
// listed), so verification stays cheap on big tables.
func TestVerifyListsOnlyTopLevelChains(t *testing.T) {
	counts := map[int]int{}
	for _, n := range []int{10, 300} {
		fake := &listingFake{Fake: iptablestest.NewFake()}
		b := newTestBackend(t, fake.Fake, nil)
		b.runner = fake
		st := bigState(n, 3)
		mustSync(t, b, st, fullDiff())
		fake.lists = 0
		mustSync(t, b, st, periodicDiff())
		counts[n] = fake.lists
	}
	if counts[10] != counts[300] || counts[10] > 20 {
		t.Errorf("chains listed per verification: %v; want the same small number for 10 and 300 services", counts)
	}
	t.Logf("chains listed per verification: %d", counts[10])
}
