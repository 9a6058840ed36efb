package nftables_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestRestartChurn runs TestPartialSyncChurn's churn into two tables: one
// a daemon keeps syncing partially, the other restarted (a new backend's
// full sync over the table) at random steps. A restart reads the table
// back and writes only what differs, keeping the table's group
// identifiers and endpoint orders where its rules name them, so both
// tables must hold the same chains, rules and elements but for where
// each endpoint group sits in the endpoint maps (a group whose port has
// no endpoint has no rule naming it, so a restart may place it
// elsewhere), and carry a fresh full sync's packet flows.
func TestRestartChurn(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	_, node := flowtest.Fixture()
	svcs, nextIP := churnServices(12)
	running, restarted := nftablestest.NewFake(), nftablestest.NewFake()
	rb, b := flowBackend(t, running, node), flowBackend(t, restarted, node)
	st := emptyChurnState()
	mustSync(t, rb, st, fullDiff())
	mustSync(t, b, st, fullDiff())
	restarts := 0
	for step := range 200 {
		s, what, next, diff := churnStep(r, svcs, nextIP, st)
		mustSync(t, rb, next, diff)
		if r.IntN(4) == 0 {
			restarts++
			b = flowBackend(t, restarted, node)
			mustSync(t, b, next, fullDiff())
		} else {
			mustSync(t, b, next, diff)
		}
		st = next
		for _, fam := range families {
			want := placementFree(running.Table(fam, nftables.TableName))
			if got := placementFree(restarted.Table(fam, nftables.TableName)); got != want {
				t.Fatalf("step %d (%s: %s), %s: the restarted daemon's table differs from the running one's:\n%s\nwant:\n%s", step, s.name, what, fam, got, want)
			}
		}
		ref := nftablestest.NewFake()
		mustSync(t, flowBackend(t, ref, node), st, fullDiff())
		if d := compareFlows(svcs, node.NodeIPs, nftablestest.FlowModel{Fake: ref, NodeIPs: node.NodeIPs}, nftablestest.FlowModel{Fake: restarted, NodeIPs: node.NodeIPs}); d != "" {
			t.Fatalf("step %d (%s: %s): the restarted table and a full sync disagree:\n%s", step, s.name, what, d)
		}
	}
	if restarts < 20 {
		t.Fatalf("only %d restarts in 200 steps", restarts)
	}
}

// placementFree is a table's text with each rule's endpoint-map lookup
// replaced by the group's ranges (relative to its first slot) and the
// endpoint maps left out: equal for tables that differ only in where
// their groups sit.
func placementFree(t *ruleset.Table) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(t.Chains)) {
		fmt.Fprintf(&b, "chain %s\n", name)
		for _, r := range t.Chains[name].Rules {
			for _, e := range r.Exprs {
				if d, ok := e.(ruleset.DNAT); ok {
					fmt.Fprintf(&b, " dnat to group %v", groupRanges(t, d))
				} else {
					fmt.Fprintf(&b, " %s", e.Text(t.Family))
				}
			}
			fmt.Fprintf(&b, " %q\n", r.Comment)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Sets)) {
		if strings.HasPrefix(name, "endpoints-") {
			continue
		}
		fmt.Fprintf(&b, "set %s %v\n", name, slices.Sorted(maps.Keys(t.Sets[name].Elements)))
	}
	return b.String()
}

// groupRanges lists a group's ranges, relative to its first slot.
func groupRanges(t *ruleset.Table, d ruleset.DNAT) []string {
	var out []string
	s := t.Sets[d.Map]
	for _, e := range s.Elements {
		if lo := e.Key[0].Num; lo >= d.Offset && lo < d.Offset+ruleset.SlotSpace {
			out = append(out, fmt.Sprintf("%05d-%05d:%s", lo-d.Offset, e.KeyEnd[0].Num-d.Offset, e.Text(s.Set)[strings.Index(e.Text(s.Set), ":"):]))
		}
	}
	slices.Sort(out)
	return out
}

// TestRestartMovesClusterIPs: two services swapped cluster IPs while no
// daemon ran (as if deleted and created again). The restart finds the
// addresses' elements with the other service's chain as their verdict,
// replaces them, and leaves the table a first sync of the state writes.
func TestRestartMovesClusterIPs(t *testing.T) {
	_, node := flowtest.Fixture()
	before, after := scaleState(6, 2, 1), scaleState(6, 2, 1)
	names := sortedPortNames(after)
	a, b := after.Services[names[1]], after.Services[names[4]]
	a.ClusterIPs, b.ClusterIPs = b.ClusterIPs, a.ClusterIPs
	want := oneTransactionDump(t, after, node)
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), before, fullDiff())
	committed := len(fake.Transactions)
	mustSync(t, flowBackend(t, fake, node), after, fullDiff())
	checkDumps(t, fake, want, "the restart")
	_, added, deleted := fake.Transactions[committed].Counts()
	if added != 2 || deleted != 2 {
		t.Errorf("the restart added %d and deleted %d elements, want 2 and 2 (the two addresses' service-ips verdicts)", added, deleted)
	}
}
