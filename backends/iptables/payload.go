package iptables

import (
	"bytes"
	"iter"
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
	// rerender gives back the rules of sealed chains (full syncs).
	rerender *rerenderer
}

// writeLines is what a whole-chain write costs in payload lines.
func writeLines(c *chainRules) int {
	if c.edits != nil {
		return len(c.edits)
	}
	return 1 + c.ruleCount()
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

// pieces yields the transaction as iptables-restore input, piece by
// piece (the parts of each line, then its end), without copying:
// per table, the declarations of every chain it touches, the rules of
// the chains it writes, then the deletions. It is pure: the rules of
// sealed chains are rendered again here (sealed.go), a port at a time,
// so a full sync's payload (~40 MB at 10k services x 10 endpoints) is
// never held whole, beside the rules it is made of; apply writes the
// pieces into iptables-restore as they come. A sealed chain that renders
// differently ends it with an error, before its table's COMMIT. Same
// transaction, same bytes.
func (t *transaction) pieces() iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		e := &emitter{yield: yield}
		for _, tbl := range allTables() {
			if t.touches(tbl) && !t.writeTable(e, tbl) {
				return
			}
		}
	}
}

// writeTable writes one table's section; false when the pieces stopped.
func (t *transaction) writeTable(e *emitter, tbl table) bool {
	e.line("*", string(tbl))
	if t.listing[tbl] {
		e.line("-S")
	}
	for name := range t.declared(tbl) {
		e.line(":", name, " - [0:0]")
	}
	for _, w := range t.writes {
		if w.key.table != tbl {
			continue
		}
		lines, err := chainLines(w, t.rerender)
		if err != nil {
			e.fail(err)
			return false
		}
		for _, r := range lines {
			e.line(r)
		}
	}
	for _, k := range t.deletes {
		if k.table == tbl {
			e.line("-X ", k.name)
		}
	}
	for _, l := range t.jumps.jumpLines(tbl) {
		e.line(l)
	}
	e.line("COMMIT")
	return !e.stopped
}

// payload is the whole payload in one buffer (the restores of partial
// syncs, and runners that cannot stream), or the error that ended it.
func (t *transaction) payload() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(t.lines * 120)
	for piece, err := range t.pieces() {
		if err != nil {
			return nil, err
		}
		b.WriteString(piece)
	}
	return b.Bytes(), nil
}

// emitter yields payload lines made of parts; once yield says stop, it
// yields nothing more.
type emitter struct {
	yield   func(string, error) bool
	stopped bool
}

func (e *emitter) line(parts ...string) {
	for _, s := range parts {
		e.put(s)
	}
	e.put("\n")
}

func (e *emitter) put(s string) {
	if !e.stopped {
		e.stopped = !e.yield(s, nil)
	}
}

// fail ends the pieces with err.
func (e *emitter) fail(err error) {
	if !e.stopped {
		e.stopped = true
		e.yield("", err)
	}
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
func (t *transaction) declared(tbl table) iter.Seq[string] {
	inOrder := func(yield func(string) bool) {
		for _, c := range t.writes {
			if c.key.table == tbl && c.edits == nil && !yield(c.key.name) {
				return
			}
		}
		for _, k := range t.deletes {
			if k.table == tbl && !yield(k.name) {
				return
			}
		}
	}
	if t.byName {
		return slices.Values(slices.Sorted(inOrder))
	}
	return inOrder
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
		if c.edits != nil {
			out[c.key.table] += len(c.edits)
		} else {
			out[c.key.table] += c.ruleCount()
		}
	}
	return out
}

// chainLines is what the payload writes for a chain: its edits, or its
// rules after its declaration (a sealed chain's rendered again by x).
func chainLines(c *chainRules, x *rerenderer) ([]string, error) {
	switch {
	case c.edits != nil:
		return c.edits, nil
	case c.sealed != nil:
		return x.rules(c)
	}
	return c.rules, nil
}
