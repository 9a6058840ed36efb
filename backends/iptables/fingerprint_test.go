package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// fingerprintFake is a listingFake with a fingerprint that changes on
// every write (restore or single-rule operation), like the nf_tables
// generation, and counts table saves and the chains (built-in ones
// aside) whose rules were counted one by one.
type fingerprintFake struct {
	*listingFake
	writes  int
	saves   atomic.Int32 // the first sync saves the tables concurrently
	counted []string
}

func (f *fingerprintFake) Fingerprint(context.Context, runner.Family) (uint64, error) {
	return uint64(len(f.Restores()) + f.writes), nil
}

func (f *fingerprintFake) SaveTable(ctx context.Context, fam runner.Family, table string) ([]byte, error) {
	f.saves.Add(1)
	return f.Fake.SaveTable(ctx, fam, table)
}

func (f *fingerprintFake) CountChainRules(ctx context.Context, fam runner.Family, table string, chains []string) (*runner.TableCounts, error) {
	for _, c := range chains {
		if !slices.Contains([]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}, c) {
			f.counted = append(f.counted, c)
		}
	}
	return f.Fake.CountChainRules(ctx, fam, table, chains)
}

func (f *fingerprintFake) FlushChain(fam runner.Family, table, chain string) error {
	f.writes++
	return f.Fake.FlushChain(fam, table, chain)
}

func (f *fingerprintFake) EnsureChain(fam runner.Family, table, chain string) (bool, error) {
	f.writes++
	return f.Fake.EnsureChain(fam, table, chain)
}

func newFingerprintFake(mode string) *fingerprintFake {
	f := &fingerprintFake{listingFake: &listingFake{Fake: iptablestest.NewFake()}}
	f.SetMode(mode)
	return f
}

// TestVerifyReadsNothingWhileUntouched: while the fingerprint shows no
// other writer, a periodic sync lists and saves nothing, whatever the
// number of services; once someone flushes a KUBE-SVC chain, the next
// periodic sync finds it without saving a table and rewrites that chain
// alone, on both iptables modes.
func TestVerifyReadsNothingWhileUntouched(t *testing.T) {
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			fake := newFingerprintFake(mode)
			b := newTestBackend(t, fake.Fake, nil)
			b.runner = fake
			st, names := partialFixture()
			mustSync(t, b, st, fullDiff())
			mustSync(t, b, st, changedDiff(false, names[1]))
			fake.lists = 0
			fake.saves.Store(0)
			if res := mustSync(t, b, st, periodicDiff()); res.Full || fake.lists != 0 || fake.saves.Load() != 0 {
				t.Fatalf("untouched: full %v, %d listings, %d saves; want partial, none", res.Full, fake.lists, fake.saves.Load())
			}
			svcChain := chainsFor(names[0]).cluster
			if err := fake.FlushChain(runner.IPv4, "nat", svcChain); err != nil {
				t.Fatal(err)
			}
			n := len(fake.Restores())
			if res := mustSync(t, b, st, periodicDiff()); res.Full || fake.saves.Load() != 0 {
				t.Fatalf("after a flush: full %v, %d saves; want a partial sync, no save", res.Full, fake.saves.Load())
			}
			assertWroteOnly(t, restoresSince(fake.Fake, n), svcChain)
			assertMatchesReference(t, fake.Fake, nil, st)
		})
	}
}

// assertWroteOnly checks that the restores declared exactly the chains
// named.
func assertWroteOnly(t *testing.T, restores []iptablestest.RestoreCall, chains ...string) {
	t.Helper()
	var got []string
	for _, r := range restores {
		for _, line := range strings.Split(string(r.Data), "\n") {
			if name, _, ok := strings.Cut(strings.TrimPrefix(line, ":"), " "); ok && strings.HasPrefix(line, ":") {
				got = append(got, name)
			}
		}
	}
	slices.Sort(got)
	slices.Sort(chains)
	if !slices.Equal(got, chains) {
		t.Errorf("restores declared %v, want %v", got, chains)
	}
}

// TestVerifyForeignWriter: another program's writes bump the fingerprint
// but leave switchyard's chains alone; the verification that follows
// repairs nothing and, on iptables-nft, counts the rules of no chain (the
// use counts learnt after the full sync match).
func TestVerifyForeignWriter(t *testing.T) {
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			fake := newFingerprintFake(mode)
			b := newTestBackend(t, fake.Fake, nil)
			b.runner = fake
			st := bigState(50, 3)
			mustSync(t, b, st, fullDiff())
			fake.saves.Store(0) // the first sync saved the tables
			if _, err := fake.EnsureChain(runner.IPv4, "nat", "DOCKER"); err != nil {
				t.Fatal(err)
			}
			n := len(fake.Restores())
			if res := mustSync(t, b, st, periodicDiff()); res.Full || len(restoresSince(fake.Fake, n)) != 0 {
				t.Fatalf("after a foreign write: full %v, %d restores; want none", res.Full, len(restoresSince(fake.Fake, n)))
			}
			if len(fake.counted) != 0 || fake.saves.Load() != 0 {
				t.Errorf("counted the rules of %d chains, saved %d tables; want none", len(fake.counted), fake.saves.Load())
			}
		})
	}
}

// TestVerifyLearnsAfterPartialSyncs: on iptables-nft a chain created by a
// partial sync has no learnt use count yet; the first verification after
// a foreign write counts the rules of those few chains only, the next
// one none.
func TestVerifyLearnsAfterPartialSyncs(t *testing.T) {
	fake := newFingerprintFake(runner.ModeNFT)
	b := newTestBackend(t, fake.Fake, nil)
	b.runner = fake
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	st = cloneState(st)
	st.Endpoints[names[0]] = append(st.Endpoints[names[0]], ep("10.244.4.1:80"))
	mustSync(t, b, st, changedDiff(false, names[0]))
	for i, wantMax := range []int{5, 0} {
		if _, err := fake.EnsureChain(runner.IPv4, "filter", fmt.Sprintf("FOREIGN-%d", i)); err != nil {
			t.Fatal(err)
		}
		fake.counted = nil
		if res := mustSync(t, b, st, periodicDiff()); res.Full {
			t.Fatalf("verification %d: full sync", i)
		}
		t.Logf("verification %d counted the rules of %v", i, fake.counted)
		if len(fake.counted) > wantMax {
			t.Errorf("verification %d counted the rules of %v; want at most %d chains", i, fake.counted, wantMax)
		}
	}
}

// TestRepairDeletedChains: a deleted KUBE-SVC chain (with its
// KUBE-SERVICES rule) or KUBE-SEP chain comes back through a partial sync
// writing only that service's changed chains and KUBE-SERVICES.
func TestRepairDeletedChains(t *testing.T) {
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			fake := newFingerprintFake(mode)
			b := newTestBackend(t, fake.Fake, nil)
			b.runner = fake
			st, names := partialFixture()
			mustSync(t, b, st, fullDiff())
			svcChain := chainsFor(names[0]).cluster
			deleteServiceByHand(t, fake.Fake, names[0])
			fake.writes++
			n := len(fake.Restores())
			if res := mustSync(t, b, st, periodicDiff()); res.Full {
				t.Fatal("deleted KUBE-SVC chain: full sync")
			}
			assertWroteOnly(t, restoresSince(fake.Fake, n), svcChain, chainServices)
			assertMatchesReference(t, fake.Fake, nil, st)

			deleteEndpointByHand(t, fake.Fake, names[0])
			fake.writes++
			n = len(fake.Restores())
			if res := mustSync(t, b, st, periodicDiff()); res.Full {
				t.Fatal("deleted KUBE-SEP chain: full sync")
			}
			if got := len(restoresSince(fake.Fake, n)); got != 1 {
				t.Errorf("repair took %d restores, want 1", got)
			}
			assertMatchesReference(t, fake.Fake, nil, st)
		})
	}
}

// TestVerifyAfterRepairStillSees: a flushed KUBE-SVC chain also took a
// jump away from each of its KUBE-SEP chains; the verification that finds
// it must not learn those lowered use counts as normal, or a rule deleted
// later from one of those KUBE-SEP chains (use back to what was learnt)
// would go unseen.
func TestVerifyAfterRepairStillSees(t *testing.T) {
	fake := newFingerprintFake(runner.ModeNFT)
	b := newTestBackend(t, fake.Fake, nil)
	b.runner = fake
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	svcChain := chainsFor(names[0]).cluster
	sep := firstEndpointChain(t, fake.Fake, svcChain)
	if err := fake.FlushChain(runner.IPv4, "nat", svcChain); err != nil {
		t.Fatal(err)
	}
	mustSync(t, b, st, periodicDiff())
	assertMatchesReference(t, fake.Fake, nil, st)

	r := fake.Rules(runner.IPv4, "nat", sep)[0]
	if err := fake.DeleteRule(runner.IPv4, "nat", sep, r.Args...); err != nil {
		t.Fatal(err)
	}
	fake.writes++
	n := len(fake.Restores())
	mustSync(t, b, st, periodicDiff())
	assertWroteOnly(t, restoresSince(fake.Fake, n), sep)
	assertMatchesReference(t, fake.Fake, nil, st)
}

func firstEndpointChain(t *testing.T, fake *iptablestest.Fake, svcChain string) string {
	t.Helper()
	for _, r := range fake.Rules(runner.IPv4, "nat", svcChain) {
		if strings.HasPrefix(r.Jump, prefixEndpoint) {
			return r.Jump
		}
	}
	t.Fatalf("%s jumps to no KUBE-SEP chain", svcChain)
	return ""
}

// TestVerifyAfterChangeSyncStillSees: someone flushes a KUBE-SVC chain,
// then a sync for an unrelated change (not due to verify) runs before the
// periodic one. The change sync must not take the moved fingerprint as
// its own: the periodic sync still finds and repairs the chain, instead
// of the damage lasting until the next full sync.
func TestVerifyAfterChangeSyncStillSees(t *testing.T) {
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			fake := newFingerprintFake(mode)
			b := newTestBackend(t, fake.Fake, nil)
			b.runner = fake
			st, names := partialFixture()
			mustSync(t, b, st, fullDiff())
			svcChain := chainsFor(names[0]).cluster
			if err := fake.FlushChain(runner.IPv4, "nat", svcChain); err != nil {
				t.Fatal(err)
			}
			mustSync(t, b, st, changedDiff(false, names[1]))
			n := len(fake.Restores())
			mustSync(t, b, st, periodicDiff())
			assertWroteOnly(t, restoresSince(fake.Fake, n), svcChain)
			assertMatchesReference(t, fake.Fake, nil, st)
		})
	}
}
