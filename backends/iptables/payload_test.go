package iptables

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlanTransactions(t *testing.T) {
	chain := func(t table, name string, rules int) *chainRules {
		c := newChain(t, name)
		for i := 0; i < rules; i++ {
			c.rules = append(c.rules, fmt.Sprintf("-A %s -j RETURN", name))
		}
		return c
	}
	writes := []*chainRules{
		chain(tableNAT, chainServices, 5),
		chain(tableNAT, "KUBE-SVC-A", 3),
		chain(tableNAT, "KUBE-SEP-A1", 2),
		chain(tableNAT, "KUBE-SEP-A2", 2),
		chain(tableFilter, chainServices, 1),
		chain(tableNAT, "KUBE-EXT-A", 2),
		chain(tableNAT, chainMarkMasq, 1),
		chain(tableNAT, "KUBE-HUGE-SEP", 0),
	}
	writes[len(writes)-1] = chain(tableNAT, "KUBE-SEP-HUGE", 20)
	deletes := []chainKey{{tableNAT, "KUBE-SEP-OLD"}, {tableNAT, "KUBE-FW-OLD"}, {tableNAT, "KUBE-SVC-OLD"}}

	txs := planTransactions(writes, deletes, 8)
	var got [][]string
	for _, tx := range txs {
		var names []string
		for _, c := range tx.writes {
			names = append(names, string(c.key.table)+"/"+c.key.name)
		}
		for _, k := range tx.deletes {
			names = append(names, "-X "+k.name)
		}
		got = append(got, names)
		if tx.lines > 8 && len(tx.writes)+len(tx.deletes) != 1 {
			t.Errorf("transaction of %d lines holds more than one oversized chain: %v", tx.lines, names)
		}
	}
	// Lines: a write is 1 + rules, a delete 2; the bound is 8.
	want := [][]string{
		{"nat/KUBE-MARK-MASQ", "nat/KUBE-SEP-A1", "nat/KUBE-SEP-A2"}, // 2+3+3
		{"nat/KUBE-SEP-HUGE"},                                    // 21 > bound: alone
		{"nat/KUBE-SVC-A", "nat/KUBE-EXT-A"},                     // 4+3
		{"filter/KUBE-SERVICES", "nat/KUBE-SERVICES"},            // 2+6; nat KUBE-SERVICES is the top tier
		{"-X KUBE-FW-OLD", "-X KUBE-SVC-OLD", "-X KUBE-SEP-OLD"}, // after every write, referrers first
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("transactions (-want +got):\n%s", d)
	}
	if n := len(planTransactions(writes, deletes, 0)); n != 1 {
		t.Errorf("unbounded plan has %d transactions, want 1", n)
	}
}

func TestTransactionPayload(t *testing.T) {
	tx := &transaction{
		writes: []*chainRules{
			newChain(tableNAT, "KUBE-SVC-A", "-A KUBE-SVC-A -j KUBE-SEP-A"),
			newChain(tableFilter, chainServices),
			newChain(tableMangle, chainCanary),
		},
		deletes: []chainKey{{tableNAT, "KUBE-SEP-B"}},
	}
	payload := func(nat ...string) string {
		return strings.Join(append([]string{
			"*mangle", ":KUBE-PROXY-CANARY - [0:0]", "COMMIT",
			"*filter", ":KUBE-SERVICES - [0:0]", "COMMIT", "*nat"},
			append(nat, "-A KUBE-SVC-A -j KUBE-SEP-A", "-X KUBE-SEP-B", "COMMIT", "")...), "\n")
	}
	// iptables-nft: declared in write order (writes, then deletions).
	if d := cmp.Diff(payload(":KUBE-SVC-A - [0:0]", ":KUBE-SEP-B - [0:0]"), string(mustPayload(t, tx))); d != "" {
		t.Errorf("payload (-want +got):\n%s", d)
	}
	// Legacy: sorted by name.
	tx.byName = true
	if d := cmp.Diff(payload(":KUBE-SEP-B - [0:0]", ":KUBE-SVC-A - [0:0]"), string(mustPayload(t, tx))); d != "" {
		t.Errorf("legacy payload (-want +got):\n%s", d)
	}
}

// mustPayload is the transaction's whole payload.
func mustPayload(tb testing.TB, tx *transaction) []byte {
	tb.Helper()
	data, err := tx.payload()
	if err != nil {
		tb.Fatal(err)
	}
	return data
}
