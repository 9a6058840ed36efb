package nftables_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// A kube-proxy table another program created (kube-proxy's own nftables
// mode) is replaced whole by the first sync, through the handover table,
// so none of its objects survives; switchyard's own table is never
// replaced.
func TestFirstSyncReplacesAForeignTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	addUpstreamTable(t, fake)

	b := flowBackend(t, fake, node)
	mustSync(t, b, state, fullDiff())
	// IPv4 (the fixture fits one chunk): the handover table with the
	// whole ruleset; the foreign table deleted; ours with the same
	// ruleset; the handover table deleted.
	var v4 []*ruleset.Transaction
	for _, tx := range fake.Transactions[1:] {
		if tx.Family == ruleset.IPv4 {
			v4 = append(v4, tx)
		}
	}
	if len(v4) != 4 {
		t.Fatalf("%d IPv4 transactions, want 4 (handover, foreign deleted, ours, handover deleted)", len(v4))
	}
	handover, del, ours, drop := v4[0], v4[1], v4[2], v4[3]
	if handover.Table != nftables.HandoverTable || del.Table != nftables.TableName || ours.Table != nftables.TableName || drop.Table != nftables.HandoverTable {
		t.Fatalf("transactions on tables %s, %s, %s, %s", handover.Table, del.Table, ours.Table, drop.Table)
	}
	if h, r := len(handover.Ops), len(ours.Ops); h != r {
		t.Errorf("the handover table got %d operations, ours %d: want the same ruleset", h, r)
	}
	if len(del.Ops) != 1 || del.Ops[0].Kind != ruleset.OpDeleteTable {
		t.Errorf("the second transaction has %d operations, want only the foreign table deleted", len(del.Ops))
	}
	if drop.Ops[0].Kind != ruleset.OpDeleteTable {
		t.Errorf("the last transaction is %s, want the handover table deleted", drop.Ops[0].String())
	}
	if dump := fake.Dump(ruleset.IPv4, nftables.TableName); strings.Contains(dump, "cluster-ips-check") {
		t.Errorf("the foreign table's chain survived:\n%s", dump)
	}
	if dump := fake.Dump(ruleset.IPv4, nftables.HandoverTable); dump != "" {
		t.Errorf("the handover table is left:\n%s", dump)
	}

	// A restart over switchyard's own table keeps it (affinity state).
	before := len(fake.Transactions)
	b = flowBackend(t, fake, node)
	mustSync(t, b, state, fullDiff())
	for _, tx := range fake.Transactions[before:] {
		for _, op := range tx.Ops {
			if op.Kind == ruleset.OpDeleteTable {
				t.Fatalf("a sync over switchyard's own %s table deleted it", tx.Family)
			}
		}
	}
}

// A handover table left by a daemon that died mid-replacement is deleted
// by the next full sync.
func TestFullSyncDeletesAStaleHandoverTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	stale := ruleset.NewTransaction(ruleset.IPv4, nftables.HandoverTable)
	stale.AddTable()
	stale.AddChain(&ruleset.Chain{Name: "services"})
	if err := fake.Run(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	if fake.Table(ruleset.IPv4, nftables.HandoverTable) != nil {
		t.Error("the stale handover table survived a full sync")
	}
}

// After a rollback kube-proxy adopts the table without giving it its
// comment; switchyard coming back recognises kube-proxy's objects and
// replaces the table through the handover table as well.
func TestFirstSyncReplacesAnAdoptedTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	want := fake.Dump(ruleset.IPv4, nftables.TableName)
	fake.Tamper(ruleset.IPv4, nftables.TableName, func(tbl *ruleset.Table) {
		tbl.Chains["cluster-ips-check"] = &ruleset.Chain{Name: "cluster-ips-check"}
	})
	before := len(fake.Transactions)
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	if got := fake.Dump(ruleset.IPv4, nftables.TableName); got != want {
		t.Errorf("after replacing the adopted table it differs:\n%s", got)
	}
	var tables []string
	for _, tx := range fake.Transactions[before:] {
		tables = append(tables, string(tx.Family)+" "+tx.Table)
	}
	if !slices.Contains(tables, "ip "+nftables.HandoverTable) {
		t.Errorf("no handover table written; transactions on %v", tables)
	}
}

// RemoveLeftovers (--cleanup-after-rollback) refuses switchyard's own
// table, refuses (changing nothing) while kube-proxy's maps still point at
// switchyard's chains, and after kube-proxy's adoption removes exactly the
// objects only switchyard writes.
func TestRemoveLeftoversAfterAdoption(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	b := flowBackend(t, fake, node)
	mustSync(t, b, state, fullDiff())
	if _, err := b.RemoveLeftovers(t.Context()); err == nil {
		t.Fatal("RemoveLeftovers accepted switchyard's own table")
	}
	adopt := func(tbl *ruleset.Table) { // what kube-proxy's first sync does to base chains
		tbl.Chains["cluster-ips-check"] = &ruleset.Chain{Name: "cluster-ips-check"}
		for _, c := range tbl.Chains {
			if c.Hook != nil || !nftables.SwitchyardObject(c.Name) {
				c.Rules = nil
			}
		}
	}
	fake.Tamper(ruleset.IPv4, nftables.TableName, adopt)
	fake.Tamper(ruleset.IPv6, nftables.TableName, adopt)
	before := fake.Dump(ruleset.IPv4, nftables.TableName)
	if _, err := b.RemoveLeftovers(t.Context()); err == nil {
		t.Error("RemoveLeftovers succeeded while service-ips still points at switchyard's chains")
	} else if fake.Dump(ruleset.IPv4, nftables.TableName) != before {
		t.Error("a refused RemoveLeftovers changed the table")
	}
	for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
		fake.Tamper(fam, nftables.TableName, func(tbl *ruleset.Table) {
			for _, m := range []string{"service-ips", "service-nodeports", "firewall-ips"} {
				if s := tbl.Sets[m]; s != nil {
					s.Elements = map[string]ruleset.Element{}
				}
			}
		})
	}
	removed, err := b.RemoveLeftovers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("removed %v", removed)
	for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
		tbl := fake.Table(fam, nftables.TableName)
		for name := range tbl.Chains {
			if nftables.SwitchyardObject(name) {
				t.Errorf("%s chain %s left", fam, name)
			}
		}
		for name := range tbl.Sets {
			if nftables.SwitchyardObject(name) {
				t.Errorf("%s set %s left", fam, name)
			}
		}
		if tbl.Chains["cluster-ips-check"] == nil || tbl.Sets["service-ips"] == nil {
			t.Errorf("%s: kube-proxy's objects removed too", fam)
		}
	}
}

// addUpstreamTable gives the fake an IPv4 kube-proxy table another
// program made (kube-proxy's nftables mode), with one of its chains.
func addUpstreamTable(t *testing.T, fake *nftablestest.Fake) {
	t.Helper()
	upstream := ruleset.NewTransaction(ruleset.IPv4, nftables.TableName)
	upstream.AddTable()
	upstream.AddChain(&ruleset.Chain{Name: "cluster-ips-check"})
	if err := fake.Run(t.Context(), upstream); err != nil {
		t.Fatal(err)
	}
	fake.SetForeign(ruleset.IPv4, nftables.TableName)
}
