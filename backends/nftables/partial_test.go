package nftables_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

func cloneState(st *proxier.State) *proxier.State {
	return &proxier.State{Services: maps.Clone(st.Services), Endpoints: maps.Clone(st.Endpoints), Node: st.Node}
}

func changedDiff(names ...proxier.ServicePortName) *proxier.Diff {
	d := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{}}
	for _, n := range names {
		d.Changed[n] = struct{}{}
	}
	return d
}

// TestPartialSyncsReachFullSyncTable reaches the fixture through partial
// syncs (endpoints restored one port at a time, a port removed and added
// back) and checks that the table is then exactly what one full sync
// writes, and that each partial sync wrote elements only when only
// endpoints changed.
func TestPartialSyncsReachFullSyncTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	b := flowBackend(t, fake, node)
	empty := cloneState(state)
	for n := range empty.Endpoints {
		empty.Endpoints[n] = nil
	}
	mustSync(t, b, empty, fullDiff())
	cur := empty
	for _, n := range sortedPorts(state) {
		cur = cloneState(cur)
		cur.Endpoints[n] = state.Endpoints[n]
		before := len(fake.Transactions)
		if res := mustSync(t, b, cur, changedDiff(n)); res.Full {
			t.Fatalf("partial sync of %s went full", n)
		}
		if state.Services[n].AffinityTimeoutSeconds == 0 {
			assertElementsOnly(t, fake.Transactions[before:], n)
		}
	}
	some := sortedPorts(state)[0]
	gone := cloneState(cur)
	delete(gone.Services, some)
	delete(gone.Endpoints, some)
	mustSync(t, b, gone, changedDiff(some))
	mustSync(t, b, state, changedDiff(some))

	ref := nftablestest.NewFake()
	mustSync(t, flowBackend(t, ref, node), state, fullDiff())
	for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
		if d := cmp.Diff(ref.Dump(fam, nftables.TableName), fake.Dump(fam, nftables.TableName)); d != "" {
			t.Errorf("%s table after partial syncs differs from a full sync (-full +partial):\n%s", fam, d)
		}
	}
	flowtest.Run(t, nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs})
}

// assertElementsOnly checks that endpoint changes touched no rule.
func assertElementsOnly(t *testing.T, txs []*ruleset.Transaction, n proxier.ServicePortName) {
	t.Helper()
	for _, tx := range txs {
		for _, op := range tx.Ops {
			switch op.Kind {
			case ruleset.OpAddElements, ruleset.OpDeleteElements:
			default:
				t.Errorf("endpoints of %s changed: transaction has %s", n, op.String())
			}
		}
	}
}

func sortedPorts(st *proxier.State) []proxier.ServicePortName {
	var out []proxier.ServicePortName
	for n := range st.Services {
		out = append(out, n)
	}
	slicesSort(out)
	return out
}

// TestSingleStackPortsTakeNoGroupInTheOtherFamily: on a dual-stack node,
// IPv4-only service ports give the ip6 table no endpoint map (they took
// an identifier, and so a map slot, in both families before), through a
// full sync and through a partial one that adds another.
func TestSingleStackPortsTakeNoGroupInTheOtherFamily(t *testing.T) {
	_, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	b := flowBackend(t, fake, node)
	st := scaleState(40, 2, 1)
	mustSync(t, b, st, fullDiff())
	next := scaleState(41, 2, 1)
	mustSync(t, b, next, changedDiff(addedPorts(st, next)...))
	for fam, want := range map[ruleset.Family]int{ruleset.IPv4: 3, ruleset.IPv6: 0} {
		if maps := endpointMaps(fake, fam); maps != want {
			t.Errorf("%s table: %d endpoint maps for 41 IPv4 service ports, want %d", fam, maps, want)
		}
	}
}

// TestFullSyncsResizeEndpointMaps: a full sync of 20k groups packs 32 in
// a map; a partial sync then keeps that width; a full sync of fewer
// groups goes back to 16 a map and deletes the maps it no longer needs.
func TestFullSyncsResizeEndpointMaps(t *testing.T) {
	_, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	b := flowBackend(t, fake, node)
	countMaps := func() int { return endpointMaps(fake, ruleset.IPv4) }
	big := scaleState(20000, 1, 1)
	mustSync(t, b, big, fullDiff())
	if got := countMaps(); got != 625 {
		t.Fatalf("20k groups: %d endpoint maps, want 625 (32 a map)", got)
	}
	more := scaleState(20001, 1, 1)
	mustSync(t, b, more, changedDiff(addedPorts(big, more)...))
	if got := countMaps(); got != 626 {
		t.Errorf("after a partial sync adding group 20001: %d maps, want 626 (still 32 a map)", got)
	}
	mustSync(t, b, scaleState(100, 1, 1), fullDiff())
	if got := countMaps(); got != 7 {
		t.Errorf("100 groups after a full sync: %d maps, want 7 (16 a map)", got)
	}
}

// addedPorts names the service ports of next that prev lacks.
func addedPorts(prev, next *proxier.State) []proxier.ServicePortName {
	var out []proxier.ServicePortName
	for name := range next.Services {
		if _, ok := prev.Services[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// endpointMaps counts the family table's endpoint maps in the fake.
func endpointMaps(fake *nftablestest.Fake, fam ruleset.Family) int {
	n := 0
	for name := range fake.Table(fam, nftables.TableName).Sets {
		if strings.HasPrefix(name, "endpoints-") {
			n++
		}
	}
	return n
}
