package nftables_test

import (
	"context"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	nfttest "github.com/switchyard-proxy/switchyard/backends/nftables/testing"
	"math/rand/v2"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestKernelRestartAdoptsTable: a new daemon's first (full) sync over the
// table its predecessor left: with the same state, and with fewer
// services than the predecessor had endpoint maps for. Chunks of three
// objects: the first syncs commit several, the restarts stage several
// into one transaction.
func TestKernelRestartAdoptsTable(t *testing.T) {
	kerneltest.Require(t)
	defer nftables.SetChunkObjects(3)()
	ns := kerneltest.NewNetns(t, "nftrestart")
	addForeignTables(t, ns)
	state, node := flowtest.Fixture()
	kernelSync(t, ns, kernelBackend(t, node), state, fullDiff())
	kernelSync(t, ns, kernelBackend(t, node), state, fullDiff())

	r := rand.New(rand.NewPCG(5, 6))
	svcs, nextIP := churnServices(40)
	many := emptyChurnState()
	for _, s := range svcs {
		s.churn(r, nextIP)
		s.exists = true
		s.write(many, churnDiff())
	}
	kernelSync(t, ns, kernelBackend(t, node), many, fullDiff())
	few := emptyChurnState()
	svcs[0].write(few, churnDiff())
	kernelSync(t, ns, kernelBackend(t, node), few, fullDiff())
}

// TestKernelRestartAfterPartialSyncs: the predecessor grew its endpoint
// maps through partial syncs (services arriving one by one, with affinity
// sets) and lost most services again before the new daemon starts, whose
// sync stages chunks of three objects into one transaction.
func TestKernelRestartAfterPartialSyncs(t *testing.T) {
	kerneltest.Require(t)
	defer nftables.SetChunkObjects(3)()
	ns := kerneltest.NewNetns(t, "nftrestart2")
	addForeignTables(t, ns)
	_, node := flowtest.Fixture()
	r := rand.New(rand.NewPCG(7, 8))
	svcs, nextIP := churnServices(40)
	old := kernelBackend(t, node)
	st := emptyChurnState()
	kernelSync(t, ns, old, st, fullDiff())
	for _, s := range svcs {
		s.churn(r, nextIP)
		s.exists = true
		next, diff := cloneState(st), churnDiff()
		s.write(next, diff)
		kernelSync(t, ns, old, next, diff)
		st = next
	}
	for _, s := range svcs[2:] {
		s.exists = false
		next, diff := cloneState(st), churnDiff()
		s.write(next, diff)
		kernelSync(t, ns, old, next, diff)
		st = next
	}
	kernelSync(t, ns, kernelBackend(t, node), st, fullDiff())
	fake := nfttest.NewFake()
	mustSync(t, flowBackend(t, fake, node), st, fullDiff())
	checkKernelCounts(t, ns, fake)
}

// addForeignTables gives the namespace what a node holds besides
// switchyard's table: iptables-nft's tables with the kubelet's chains,
// and another nftables table with a chain and a set. The kernel's chain
// dump lists every table's chains whatever table the request names; a
// daemon that took them for its own failed every sync after a restart
// (flushing KUBE-IPTABLES-HINT in its own table: ENOENT), which
// upstream's e2e suite showed once it restarted the proxy's pods.
func addForeignTables(t *testing.T, ns string) {
	t.Helper()
	for _, args := range [][]string{
		{"iptables-nft", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"},
		{"iptables-nft", "-t", "filter", "-N", "KUBE-KUBELET-CANARY"},
		{"nft", "add table ip other; add chain ip other c; add set ip other s { type ipv4_addr; }"},
	} {
		kerneltest.Run(t, append([]string{"ip", "netns", "exec", ns}, args...)...)
	}
}

// TestKernelCountsOwnTableOnly: the periodic check's counts name only
// switchyard's own chains and sets, with foreign tables present.
func TestKernelCountsOwnTableOnly(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "nftcounts")
	addForeignTables(t, ns)
	state, node := flowtest.Fixture()
	kernelSync(t, ns, kernelBackend(t, node), state, fullDiff())
	err := kerneltest.InNetns(ns, func() error {
		c, err := nftables.NewNetlinkConn().Counts(context.Background(), ruleset.IPv4, nftables.TableName)
		if err != nil {
			return err
		}
		for _, foreign := range []string{"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY", "c", "s"} {
			_, chain := c.Rules[foreign]
			_, set := c.Elements[foreign]
			if chain || set {
				t.Errorf("counts list %q of another table", foreign)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
