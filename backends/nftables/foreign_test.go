package nftables_test

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	nfttest "github.com/switchyard-proxy/switchyard/backends/nftables/testing"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// A kube-proxy table another program created (kube-proxy's own nftables
// mode) is replaced whole by the first sync, in one transaction, so none
// of its objects survives; switchyard's own table is never replaced.
func TestFirstSyncReplacesAForeignTable(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nfttest.NewFake()
	upstream := ruleset.NewTransaction(ruleset.IPv4, nftables.TableName)
	upstream.AddTable()
	upstream.AddChain(&ruleset.Chain{Name: "cluster-ips-check"})
	if err := fake.Run(t.Context(), upstream); err != nil {
		t.Fatal(err)
	}
	fake.SetForeign(ruleset.IPv4, nftables.TableName)

	b := flowBackend(t, fake, node)
	mustSync(t, b, state, fullDiff())
	tx := fake.Transactions[1]
	if tx.Family != ruleset.IPv4 {
		t.Fatalf("the first sync's first transaction is for %s", tx.Family)
	}
	if tx.Ops[0].Kind != ruleset.OpDeleteTable || tx.Ops[1].Kind != ruleset.OpAddTable {
		t.Fatalf("first sync over a foreign table starts with %s, %s; want delete table, add table", tx.Ops[0].String(), tx.Ops[1].String())
	}
	if dump := fake.Dump(ruleset.IPv4, nftables.TableName); strings.Contains(dump, "cluster-ips-check") {
		t.Errorf("the foreign table's chain survived:\n%s", dump)
	}

	// A restart over switchyard's own table keeps it (affinity state).
	b = flowBackend(t, fake, node)
	mustSync(t, b, state, fullDiff())
	for _, tx := range fake.Transactions[2:] {
		for _, op := range tx.Ops {
			if op.Kind == ruleset.OpDeleteTable {
				t.Fatalf("a sync over switchyard's own %s table deleted it", tx.Family)
			}
		}
	}
}
