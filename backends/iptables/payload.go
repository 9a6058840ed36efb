package iptables

import (
	"bytes"
	"slices"
)

// transaction is one iptables-restore --noflush run: chains replaced whole
// (declared, which flushes them, then refilled) and chains deleted
// (declared, then -X). Each table's section commits atomically.
type transaction struct {
	writes  []*chainRules
	deletes []chainKey
	lines   int
	// listing marks the tables whose section starts with "-S", and jumps
	// are appended to their table's section (first sync, firstsync.go).
	listing map[table]bool
	jumps   firstSyncPlan
	// byName declares chains sorted by name (legacy iptables); else in
	// write order (see declared).
	byName bool
}

// writeLines is what a whole-chain write costs in payload lines.
func writeLines(c *chainRules) int {
	if c.edits != nil {
		return len(c.edits)
	}
	return 1 + len(c.rules)
}

// lines is what the payload writes for a chain: its edits, or its rules
// after its declaration.
func (c *chainRules) lines() []string {
	if c.edits != nil {
		return c.edits
	}
	return c.rules
}

// deleteLines is what a deletion costs: the declaration and the -X.
const deleteLines = 2

// planTransactions packs chain writes and deletions into transactions of
// at most bound lines, never splitting a chain (a chain larger than the
// bound gets a transaction of its own). Writes go in tier order, so a
// chain is always written in the same or a later transaction than every
// chain it jumps to; deletions come after all writes, in reverse tier
// order, so nothing still jumps to a chain when it is deleted. Every
// intermediate state is therefore one iptables accepts. bound <= 0 means a
// single transaction.
//
// iptables-nft with --noflush is quadratic in the size of one transaction
// (shared/PERF-FACTS.md): bounded chunks that each declare the chains they
// fill keep a full sync linear.
func planTransactions(writes []*chainRules, deletes []chainKey, bound int) []*transaction {
	writes = slices.Clone(writes)
	slices.SortStableFunc(writes, func(a, b *chainRules) int { return int(a.tier) - int(b.tier) })
	deletes = slices.Clone(deletes)
	slices.SortStableFunc(deletes, func(a, b chainKey) int {
		return int(tierOf(b.table, b.name)) - int(tierOf(a.table, a.name))
	})
	var out []*transaction
	cur := &transaction{}
	flush := func(next int) {
		if bound > 0 && cur.lines > 0 && cur.lines+next > bound {
			out = append(out, cur)
			cur = &transaction{}
		}
	}
	for _, c := range writes {
		n := writeLines(c)
		flush(n)
		cur.writes = append(cur.writes, c)
		cur.lines += n
	}
	for _, k := range deletes {
		flush(deleteLines)
		cur.deletes = append(cur.deletes, k)
		cur.lines += deleteLines
	}
	if cur.lines > 0 {
		out = append(out, cur)
	}
	return out
}

// payload renders the transaction as iptables-restore input: per table,
// the declarations of every chain it touches (sorted), the rules of the
// chains it writes, then the deletions.
func (t *transaction) payload() []byte {
	var b bytes.Buffer
	b.Grow(t.lines * 120)
	for _, tbl := range allTables() {
		if !t.touches(tbl) {
			continue
		}
		b.WriteString("*" + string(tbl) + "\n")
		if t.listing[tbl] {
			b.WriteString("-S\n")
		}
		for _, name := range t.declared(tbl) {
			b.WriteString(":" + name + " - [0:0]\n")
		}
		for _, c := range t.writes {
			if c.key.table == tbl {
				for _, r := range c.lines() {
					b.WriteString(r)
					b.WriteByte('\n')
				}
			}
		}
		for _, k := range t.deletes {
			if k.table == tbl {
				b.WriteString("-X " + k.name + "\n")
			}
		}
		for _, l := range t.jumps.jumpLines(tbl) {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}

// declared lists the chains the transaction declares in a table (those it
// writes and those it deletes). The order is where nf_tables creates
// them, and so the order a later `iptables-nft-save` reads them back in.
//
// Legacy iptables-restore (libiptc) is much faster when user chains
// arrive sorted, as iptables-save writes them: the one-transaction full
// sync of 10k services x 10 endpoints took 6.5 s sorted and 12 s in tier
// order (hack/bench). On iptables-nft the opposite matters: iptables-nft
// 1.8.9 sorts the chains it reads with a recursion as deep as the run of
// already-sorted chains, so ~100k chains created in name order make every
// later `iptables-nft-save` and `iptables -t nat -S` die of a stack
// overflow (SIGSEGV; found at 10k services x 10 endpoints). Write order
// (tier order, chains named by hashes) is effectively random, which that
// sort handles with a shallow recursion.
func (t *transaction) declared(tbl table) []string {
	var out []string
	for _, c := range t.writes {
		if c.key.table == tbl && c.edits == nil {
			out = append(out, c.key.name)
		}
	}
	for _, k := range t.deletes {
		if k.table == tbl {
			out = append(out, k.name)
		}
	}
	if t.byName {
		slices.Sort(out)
	}
	return out
}

// tables lists the tables the transaction touches.
func (t *transaction) tables() []table {
	var out []table
	for _, tbl := range allTables() {
		if t.touches(tbl) {
			out = append(out, tbl)
		}
	}
	return out
}

func (t *transaction) touches(tbl table) bool {
	return slices.ContainsFunc(t.writes, func(c *chainRules) bool { return c.key.table == tbl }) ||
		slices.ContainsFunc(t.deletes, func(k chainKey) bool { return k.table == tbl }) ||
		slices.ContainsFunc(t.jumps.jumps, func(j jumpRule) bool { return j.table == tbl })
}

// rulesWritten counts the rule lines the transaction writes per table.
func (t *transaction) rulesWritten() map[table]int {
	out := map[table]int{}
	for _, c := range t.writes {
		out[c.key.table] += len(c.lines())
	}
	return out
}
