package nftables_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
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
	fake := nftablestest.NewFake()
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

// TestKernelRestartKeepsChains: a new daemon over its predecessor's table,
// with one service port gone, leaves the chains of the others as they
// are (the kernel's rule handles do not change) and deletes the gone
// one's; the table then holds what the fake holds after the same two
// daemons, and the kernel's elements read back (tags included) are the
// fake's.
func TestKernelRestartKeepsChains(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "nftkeep")
	addForeignTables(t, ns)
	before, node := flowtest.Fixture()
	after, _ := flowtest.Fixture()
	names := sortedPortNames(after)
	gone := names[len(names)/3]
	delete(after.Services, gone)
	delete(after.Endpoints, gone)
	kernelSync(t, ns, kernelBackend(t, node), before, fullDiff())
	handles := portRuleHandles(t, ns)
	kernelSync(t, ns, kernelBackend(t, node), after, fullDiff())
	now := portRuleHandles(t, ns)
	if len(now) == 0 || len(now) >= len(handles) {
		t.Fatalf("%d rules in port chains after the restart, %d before: want fewer, and some", len(now), len(handles))
	}
	for rule, h := range now {
		if handles[rule] != h {
			t.Errorf("the restart wrote %q again (handle %s, was %q)", rule, h, handles[rule])
		}
	}
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), before, fullDiff())
	mustSync(t, flowBackend(t, fake, node), after, fullDiff())
	checkKernelCounts(t, ns, fake)
	for _, fam := range families {
		for _, set := range []*ruleset.Set{{Name: "service-ips", Kind: ruleset.VerdictMap, Key: ruleset.Fields{ruleset.FieldDaddr, ruleset.FieldL4Proto, ruleset.FieldDport}}} {
			checkKernelElementsMatchFake(t, ns, fake, fam, set)
		}
	}
}

// checkKernelElementsMatchFake reads a set back from the kernel and from
// the fake (keys, data, verdicts and the tags nft does not show) and
// compares them.
func checkKernelElementsMatchFake(t *testing.T, ns string, fake *nftablestest.Fake, fam ruleset.Family, s *ruleset.Set) {
	t.Helper()
	read := func(conn nftables.Conn) map[string]string {
		out := map[string]string{}
		err := conn.ReadElements(context.Background(), fam, nftables.TableName, s, func(e *ruleset.Element) {
			out[e.KeyText(s)] = fmt.Sprintf("%s %x", e.Text(s), e.Tag.Key())
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	var got map[string]string
	if err := kerneltest.InNetns(ns, func() error { got = read(nftables.NewNetlinkConn()); return nil }); err != nil {
		t.Fatal(err)
	}
	want := read(fake)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s set %s read back from the kernel differs from the fake's (-fake +kernel):\n%s", fam, s.Name, d)
	}
	tagged := 0
	for _, v := range got {
		if !strings.HasSuffix(v, " ") {
			tagged++
		}
	}
	if len(got) > 0 && tagged == 0 {
		t.Errorf("%s set %s: no element carries a tag", fam, s.Name)
	}
}

// portRuleHandles maps each rule of a service port's chain, as nft lists
// it ("chain: rule"), to its handle; but those of the fixture's port with
// session affinity, whose chains a restart rewrites.
func portRuleHandles(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, fam := range families {
		listed := kerneltest.Run(t, "ip", "netns", "exec", ns, "nft", "-a", "list", "table", string(fam), nftables.TableName)
		chain := ""
		for _, line := range strings.Split(listed, "\n") {
			line = strings.TrimSpace(line)
			if name, ok := strings.CutPrefix(line, "chain "); ok {
				chain = strings.Fields(name)[0]
				continue
			}
			rule, handle, ok := strings.Cut(line, " # handle ")
			if ok && isPortChain(chain) && !strings.Contains(chain, ".sticky.") {
				out[string(fam)+" "+chain+": "+rule] = handle
			}
		}
	}
	return out
}

// sortedPortNames lists the state's service ports in order.
func sortedPortNames(st *proxier.State) []proxier.ServicePortName {
	names := make([]proxier.ServicePortName, 0, len(st.Services))
	for n := range st.Services {
		names = append(names, n)
	}
	slicesSort(names)
	return names
}

// TestKernelRestartChurn: TestRestartChurn's restarts in a real kernel,
// beside the fake going through the same daemons: after every step the
// kernel's elements (as nft lists them) and its rules per chain are the
// fake's. The kernel's read-back (element dumps with their tags, ranges
// paired again) must agree with the fake's for the restarts to write the
// same transactions, and the kernel must accept them.
func TestKernelRestartChurn(t *testing.T) {
	kernelChurn(t, "nftrchurn", rand.New(rand.NewPCG(11, 12)), 80, 3)
}
