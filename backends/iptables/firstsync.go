package iptables

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// cheapListRules is the size below which a table is cheap to read whole:
// iptables-nft fetches its rules in a few milliseconds.
const cheapListRules = 2000

// firstSyncPlan is what the first full sync of a family learned from one
// iptables-save of each table, taken before it writes anything:
//
//   - the jumps from the built-in chains that are missing, so the sync
//     adds them inside its own restore (at the end of each table's
//     section, after the chains they jump to are filled) instead of
//     checking and inserting them one iptables call at a time (four
//     execs per jump, ~100 ms at 12 jumps);
//   - on iptables-nft, which tables are small enough to be read whole by
//     iptables-nft-restore. A table section that starts with "-S" (list
//     the table: a no-op for the rules) makes iptables-nft fetch every
//     chain of the table once instead of keeping a sorted list of the
//     chains the transaction names, which it searches linearly for every
//     command: that list is what makes one --noflush transaction
//     quadratic (1k services x 10 endpoints: 4.4 s as one transaction,
//     0.54 s with "-S"; 10k: 9.7 s, faster than a plain restore's 11 s).
//     A small table makes the whole first sync one transaction at the
//     cost of the restore floor. A big table (an earlier run's rules)
//     would be listed at every chunk, so it keeps the chunked plan.
type firstSyncPlan struct {
	jumps   []jumpRule
	listing map[table]bool
	// emptyFrom marks the built-in chains that hold no rule (on
	// iptables-nft they may not even exist yet: "-I" into a missing base
	// chain fails where "-A" creates it).
	emptyFrom map[chainKey]bool
}

// surveyTables saves every table of the family once, notes in installed
// the chains an earlier run left in nat, and plans the first sync, which
// adds the missing jumps. ok is false when a save failed; the caller then
// ensures the jumps one by one as before.
func surveyTables(ctx context.Context, r runner.Interface, fam runner.Family, jumps []jumpRule, installed *installedChains) (plan firstSyncPlan, ok bool) {
	plan.listing, plan.emptyFrom = map[table]bool{}, map[chainKey]bool{}
	saves := saveAll(ctx, r, fam)
	for i, t := range allTables() {
		data, err := saves[i].data, saves[i].err
		if err != nil {
			klog.ErrorS(err, "Saving an iptables table before the first sync failed", "family", fam, "table", t)
			return firstSyncPlan{}, false
		}
		if t == tableNAT {
			installed.noteLeftovers(data)
		}
		present, rules := builtinRules(data)
		for _, j := range jumps {
			if j.table != t || present[saveLine(j)] {
				continue
			}
			if !bytes.Contains(data, []byte("\n-A "+j.from+" ")) {
				plan.emptyFrom[chainKey{table: t, name: j.from}] = true
			}
			plan.jumps = append(plan.jumps, j)
		}
		plan.listing[t] = r.Mode() == runner.ModeNFT && rules < cheapListRules
	}
	return plan, true
}

type saved struct {
	data []byte
	err  error
}

// saveAll saves every table at once (each save is an exec that mostly
// waits), in allTables order.
func saveAll(ctx context.Context, r runner.Interface, fam runner.Family) []saved {
	tables := allTables()
	out := make([]saved, len(tables))
	var wg sync.WaitGroup
	for i, t := range tables {
		wg.Go(func() {
			data, err := r.SaveTable(ctx, fam, string(t))
			out[i] = saved{data, err}
		})
	}
	wg.Wait()
	return out
}

// targetsIn says whether rs writes every chain the missing jumps go to.
// Declaring a chain flushes it, so a jump to a chain switchyard does not
// write is ensured the slow way instead. The jumps go to top-level
// chains only, so the ~130k service chains at 10k services are not
// looked at.
func (p firstSyncPlan) targetsIn(rs *Ruleset) bool {
	for _, j := range p.jumps {
		if rs.topLevel(chainKey{table: j.table, name: j.to}) == nil {
			return false
		}
	}
	return true
}

// builtinRules reads one iptables-save table: the set of "-A ..." lines
// of its built-in chains (where the jumps go; a restarted daemon's table
// holds ~300k other lines at 10k services, not worth keeping) and how
// many rules it holds in all.
func builtinRules(data []byte) (map[string]bool, int) {
	out, n := map[string]bool{}, 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("-A ")) {
			continue
		}
		n++
		chain, _, _ := bytes.Cut(line[3:], []byte(" "))
		if runner.IsBuiltinChain(string(chain)) {
			out[string(line)] = true
		}
	}
	return out, n
}

// argsText joins rule arguments as iptables-save prints them.
func argsText(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t") {
			a = `"` + a + `"`
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// saveLine is the jump as iptables-save prints it.
func saveLine(j jumpRule) string { return "-A " + j.from + " " + argsText(j.args) }

// jumpLines are the payload lines adding the missing jumps of one table,
// in the order EnsureRule(Prepend) would leave them: each "-I" lands on
// top. Into an empty built-in chain they are appended in reverse instead.
func (p firstSyncPlan) jumpLines(tbl table) []string {
	var ins, app []string
	for _, j := range p.jumps {
		if j.table != tbl {
			continue
		}
		if p.emptyFrom[chainKey{table: tbl, name: j.from}] {
			app = append([]string{"-A " + j.from + " " + argsText(j.args)}, app...)
		} else {
			ins = append(ins, "-I "+j.from+" "+argsText(j.args))
		}
	}
	return append(app, ins...)
}

// onlyOneTransaction says whether the first sync may skip chunking: on
// iptables-nft, every table it writes is cheap to list.
func (p firstSyncPlan) onlyOneTransaction(txTables []table) bool {
	for _, t := range txTables {
		if !p.listing[t] {
			return false
		}
	}
	return len(txTables) > 0
}

// attach hands the plan to the transactions: the listing to a single
// transaction, the missing jumps to the last one (everything they jump to
// is filled by then). A listed section cannot hold the jumps:
// iptables-nft-restore then no longer creates a built-in chain that does
// not exist yet (RULE_APPEND fails with ENOENT), so they get a small
// transaction of their own.
func (p firstSyncPlan) attach(txs []*transaction) []*transaction {
	if len(txs) == 0 {
		return txs
	}
	if len(txs) == 1 && p.onlyOneTransaction(txs[0].tables()) {
		txs[0].listing = p.listing
		if len(p.jumps) == 0 {
			return txs
		}
		txs = append(txs, &transaction{})
	}
	txs[len(txs)-1].jumps = p
	return txs
}
