package iptables

import (
	"context"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/iptables/runner"
	iptablestest "github.com/switchyard-proxy/switchyard/backends/iptables/testing"
)

// fingerprintFake is a listingFake with a fingerprint that changes on
// every write (restore or single-rule operation), like the nf_tables
// generation, and counts table saves.
type fingerprintFake struct {
	*listingFake
	writes int
	saves  int
}

func (f *fingerprintFake) Fingerprint(context.Context, runner.Family) (uint64, error) {
	return uint64(len(f.Restores()) + f.writes), nil
}

func (f *fingerprintFake) SaveTable(ctx context.Context, fam runner.Family, table string) ([]byte, error) {
	f.saves++
	return f.Fake.SaveTable(ctx, fam, table)
}

func (f *fingerprintFake) FlushChain(fam runner.Family, table, chain string) error {
	f.writes++
	return f.Fake.FlushChain(fam, table, chain)
}

// TestVerifyReadsNothingWhileUntouched: while the fingerprint shows no
// other writer, a periodic sync lists and saves nothing, whatever the
// number of services; once someone flushes a KUBE-SVC chain, the next
// periodic sync saves the nat table once, finds it and repairs it.
func TestVerifyReadsNothingWhileUntouched(t *testing.T) {
	fake := &fingerprintFake{listingFake: &listingFake{Fake: iptablestest.NewFake()}}
	b := newTestBackend(t, fake.Fake, nil)
	b.runner = fake
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	mustSync(t, b, st, changedDiff(false, names[1]))
	fake.lists, fake.saves = 0, 0
	if res := mustSync(t, b, st, periodicDiff()); res.Full || fake.lists != 0 || fake.saves != 0 {
		t.Fatalf("untouched: full %v, %d listings, %d saves; want partial, none", res.Full, fake.lists, fake.saves)
	}
	if err := fake.FlushChain(runner.IPv4, "nat", chainsFor(names[0]).cluster); err != nil {
		t.Fatal(err)
	}
	if res := mustSync(t, b, st, periodicDiff()); !res.Full || fake.saves != 1 {
		t.Fatalf("after a flush: full %v, %d saves; want a full sync after one save", res.Full, fake.saves)
	}
	assertMatchesReference(t, fake.Fake, nil, st)
}
