package nftables_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

var families = []ruleset.Family{ruleset.IPv4, ruleset.IPv6}

// oneTransactionDump is what a first sync of the state writes when the
// whole table fits one transaction.
func oneTransactionDump(t *testing.T, state *proxier.State, node flowtest.NodeConfig) map[ruleset.Family]string {
	t.Helper()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	if n := len(fake.Transactions); n != len(families) {
		t.Fatalf("first sync of the fixture took %d transactions, want one per family", n)
	}
	out := map[ruleset.Family]string{}
	for _, fam := range families {
		out[fam] = fake.Dump(fam, nftables.TableName)
	}
	return out
}

// checkDumps compares the fake's table of each family with want.
func checkDumps(t *testing.T, fake *nftablestest.Fake, want map[ruleset.Family]string, what string) {
	t.Helper()
	for _, fam := range families {
		if got := fake.Dump(fam, nftables.TableName); got != want[fam] {
			t.Errorf("%s: %s wrote another table than the reference:\n%s\nwant:\n%s", fam, what, got, want[fam])
		}
	}
}

// hooked counts the chains a transaction adds that a hook enters by.
func hooked(tx *ruleset.Transaction) int {
	n := 0
	for _, op := range tx.Ops {
		if op.Kind == ruleset.OpAddChain && op.Chain.Hook != nil {
			n++
		}
	}
	return n
}

// TestChunkedFirstSync: a first sync into no table, cut into a transaction
// per service port, writes the same table as one transaction, and only its
// last transaction of each family makes it reachable (adds hooked chains).
func TestChunkedFirstSync(t *testing.T) {
	state, node := flowtest.Fixture()
	want := oneTransactionDump(t, state, node)
	defer nftables.SetChunkObjects(1)()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	checkDumps(t, fake, want, "the chunked first sync")
	checkHookedLast(t, fake.Transactions)
	flowtest.Run(t, nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs})
}

// checkHookedLast: every family's sync took several transactions (the
// IPv4 one, with most ports, more than three), and only the last added
// hooked chains.
func checkHookedLast(t *testing.T, txs []*ruleset.Transaction) {
	t.Helper()
	byFamily := map[ruleset.Family][]*ruleset.Transaction{}
	for _, tx := range txs {
		byFamily[tx.Family] = append(byFamily[tx.Family], tx)
	}
	for fam, list := range byFamily {
		if len(list) < 2 || fam == ruleset.IPv4 && len(list) <= 3 {
			t.Errorf("%s: %d transactions for service ports cut one per port", fam, len(list))
		}
		for i, tx := range list {
			if last := i == len(list)-1; (hooked(tx) > 0) != last {
				t.Errorf("%s: transaction %d of %d adds %d hooked chains", fam, i+1, len(list), hooked(tx))
			}
		}
	}
}

// failingConn fails its nth Run.
type failingConn struct {
	*nftablestest.Fake
	runs, failAt int
}

func (c *failingConn) Run(ctx context.Context, tx *ruleset.Transaction) error {
	if c.runs++; c.runs == c.failAt {
		return errors.New("injected failure")
	}
	return c.Fake.Run(ctx, tx)
}

// TestChunkedFirstSyncFailure: a chunked sync that fails half-way leaves
// a table no hook reaches; the next sync deletes it and writes it whole.
func TestChunkedFirstSyncFailure(t *testing.T) {
	state, node := flowtest.Fixture()
	want := oneTransactionDump(t, state, node)
	defer nftables.SetChunkObjects(1)()
	conn := &failingConn{Fake: nftablestest.NewFake(), failAt: 4}
	b := flowBackend(t, conn, node)
	if _, err := b.Sync(context.Background(), state, fullDiff()); err == nil {
		t.Fatal("a sync whose fourth transaction failed succeeded")
	}
	tbl := conn.Table(ruleset.IPv4, nftables.TableName)
	if tbl == nil || len(tbl.Chains) == 0 {
		t.Fatal("the transactions before the failure left no table")
	}
	for name, c := range tbl.Chains {
		if c.Hook != nil {
			t.Errorf("the failed sync left hooked chain %s", name)
		}
	}
	mustSync(t, b, state, &proxier.Diff{})
	checkDumps(t, conn.Fake, want, "the sync after the failure")
}

// TestRestartOverLiveTableRewritesWhole: a new daemon over a live table
// written for more services stages its chunks into one transaction that
// leaves exactly what the old daemon's partial sync to the same state
// leaves: what is gone is deleted, and the groups left keep their
// identifiers (the table's), so their chains are not written again (but
// those of a port with session affinity, whose rules follow its
// endpoints).
func TestRestartOverLiveTableRewritesWhole(t *testing.T) {
	before, node := flowtest.Fixture()
	after, _ := flowtest.Fixture()
	names := make([]proxier.ServicePortName, 0, len(after.Services))
	for n := range after.Services {
		names = append(names, n)
	}
	slicesSort(names)
	for _, n := range names[:len(names)/2] {
		delete(after.Services, n)
		delete(after.Endpoints, n)
	}
	reference := nftablestest.NewFake()
	old := flowBackend(t, reference, node)
	mustSync(t, old, before, fullDiff())
	mustSync(t, old, after, changedDiff(names[:len(names)/2]...))
	want := map[ruleset.Family]string{}
	for _, fam := range families {
		want[fam] = reference.Dump(fam, nftables.TableName)
	}
	defer nftables.SetChunkObjects(1)()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), before, fullDiff())
	committed := len(fake.Transactions)
	mustSync(t, flowBackend(t, fake, node), after, fullDiff())
	if n := len(fake.Transactions) - committed; n != len(families) {
		t.Errorf("the restart committed %d transactions, want one per family", n)
	}
	checkDumps(t, fake, want, "the restart")
	for _, tx := range fake.Transactions[committed:] {
		for _, op := range tx.Ops {
			// (a port with session affinity has its chains rewritten)
			if op.Kind == ruleset.OpAddRule && isPortChain(op.Name) && !strings.Contains(op.Rule.Text(tx.Family), "@sticky-") {
				t.Errorf("%s: the restart wrote a rule of %s, which the table held as rendered", tx.Family, op.Name)
			}
		}
	}
}

// isPortChain tells a service port's chain from the table-wide ones.
var isPortChain = regexp.MustCompile(`^(service|external|firewall)-[A-Z0-9]{8}-`).MatchString

// TestRestartOverLiveTableFailsWhole: when the kernel rejects the one
// transaction of a restart, the table keeps every rule it had.
func TestRestartOverLiveTableFailsWhole(t *testing.T) {
	state, node := flowtest.Fixture()
	defer nftables.SetChunkObjects(1)()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	want := fake.Dump(ruleset.IPv4, nftables.TableName)
	fake.FailNext = errors.New("injected failure")
	if _, err := flowBackend(t, fake, node).Sync(context.Background(), state, fullDiff()); err == nil {
		t.Fatal("a restart whose transaction failed succeeded")
	}
	if got := fake.Dump(ruleset.IPv4, nftables.TableName); got != want {
		t.Errorf("a failed restart changed the table:\n%s\nwant:\n%s", got, want)
	}
}

// TestForeignTableReplacedInChunks: kube-proxy's table replaced a chunk
// per service port: after every commit the foreign table or a complete
// live table (the handover table, then ours) is there, and ours ends as a
// first sync of the state writes it.
func TestForeignTableReplacedInChunks(t *testing.T) {
	state, node := flowtest.Fixture()
	want := oneTransactionDump(t, state, node)
	defer nftables.SetChunkObjects(1)()
	fake := nftablestest.NewFake()
	addUpstreamTable(t, fake)
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	checkDumps(t, fake, want, "the replacement")

	replay := nftablestest.NewFake()
	for i, tx := range fake.Transactions {
		if err := replay.Run(t.Context(), tx); err != nil {
			t.Fatalf("replaying transaction %d: %v", i, err)
		}
		if tx.Family != ruleset.IPv4 || i == 0 {
			continue
		}
		ours, handover := replay.Table(ruleset.IPv4, nftables.TableName), replay.Table(ruleset.IPv4, nftables.HandoverTable)
		foreign := ours != nil && ours.Chains["cluster-ips-check"] != nil
		if !foreign && !complete(handover, want[ruleset.IPv4]) && !complete(ours, want[ruleset.IPv4]) {
			t.Errorf("after transaction %d (%s) neither the foreign table nor a complete live table is there", i, tx.Table)
		}
	}
}

// complete tells whether a table is live (a hook enters it) and holds the
// whole ruleset: the same dump as want, under its own name.
func complete(tbl *ruleset.Table, want string) bool {
	if tbl == nil {
		return false
	}
	live := false
	for _, c := range tbl.Chains {
		live = live || c.Hook != nil
	}
	return live && strings.ReplaceAll(tbl.Dump(), nftables.HandoverTable, nftables.TableName) == want
}
