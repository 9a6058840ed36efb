package nftables

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// familySync is one family's table as the backend wrote it, and the
// decisions of each sync of it. Its methods live in three files, read in
// this order: this one (full or partial, the periodic check, the repair,
// the stamp), full.go (the whole table, in chunks: chunked.go) and
// partial.go (the changed service ports only). The render they call is
// pure (render_*.go); Conn is the only I/O.
type familySync struct {
	fc     *familyConfig
	ids    *groupIDs
	orders groupOrders
	w      *written
	// needFull: w may not be what the kernel holds, so the next sync
	// must be full. Set by reset (before the first sync, after Cleanup:
	// nothing is recorded, and a partial sync renders "what was
	// written" from w.node) and after a failed sync: a failed chunked
	// full sync leaves a half-written table nothing reaches, which w
	// does not describe, and a rejected transaction may be the kernel
	// refusing a table changed behind our back, which only a full sync
	// repairs. The runner also asks for a full sync after a failure
	// (proxier.Backend's contract); this flag keeps the backend correct
	// for any caller of Sync (TestRejectedTransaction holds it to that).
	needFull bool
	// stamp is the ruleset generation after our last commit, kept by
	// reconcile.Stamp's rule.
	stamp reconcile.Stamp
	// verifiedAt is when the table was last checked or fully written.
	verifiedAt time.Time
	// restarted holds until a full sync succeeds: the table, if any, is
	// a predecessor's, whose tags the full sync trusts to leave alone
	// what already holds what it renders. A later full sync (a repair:
	// the table changed behind the daemon's back) rewrites everything.
	restarted bool
}

func newFamilySync(fc *familyConfig) *familySync {
	f := &familySync{fc: fc, restarted: true}
	f.reset()
	return f
}

// reset forgets what was written (at the start, after Cleanup): the next
// sync is full.
func (f *familySync) reset() {
	f.ids, f.orders, f.w = newGroupIDs(), nil, newWritten()
	f.needFull = true
}

func (f *familySync) renderer(node proxier.NodeInfo) *portRenderer {
	return &portRenderer{fc: f.fc, node: node, ids: f.ids, orders: f.orders, local: f.fc.localMatch(node)}
}

// syncResult reports one family's sync.
type syncResult struct {
	full                  bool
	rules, added, deleted int
	// repaired: a check found the table changed behind our back, and
	// this (full) sync rewrote it.
	repaired bool
}

// sync writes st into the family's table: fully when the diff asks for
// it, when needFull holds, when the local-traffic match changed, or when
// a due check (reconcile.Cadence) finds the table changed behind our
// back; otherwise only the service ports the diff names. Afterwards it
// stamps the generation (reconcile.Stamp).
func (f *familySync) sync(ctx context.Context, conn Conn, cadence reconcile.Cadence, st *proxier.State, diff *proxier.Diff) (syncResult, error) {
	full := diff == nil || diff.Full || f.needFull || f.localMatchChanged(st)
	damaged := false
	if !full && cadence.Due(diff, f.verifiedAt) {
		f.verifiedAt = cadence.Now()
		intact, err := f.verify(ctx, conn)
		if err != nil {
			f.needFull = true
			return syncResult{}, err
		}
		full, damaged = !intact, !intact
	}
	// A partial sync may take the generation after its commit as ours
	// only if nobody else committed since our last one: otherwise a
	// foreign change would be absorbed and the next check would miss it.
	untouched := full || f.untouched(ctx, conn)
	var r syncResult
	var err error
	if full {
		r, err = f.full(ctx, conn, st)
	} else {
		r, err = f.partial(ctx, conn, st, diff)
	}
	if err != nil {
		f.needFull = true
		return r, err
	}
	if full {
		f.verifiedAt = cadence.Now()
	}
	r.repaired = damaged
	gen, gerr := conn.Generation(ctx)
	f.stamp.Record(uint64(gen), gerr == nil, untouched)
	return r, nil
}

// localMatchChanged reports whether the local-traffic match differs from
// the one the rules in force were rendered with (NodeCIDR mode: the
// node's pod CIDRs arrived or changed). The rules of every port hold it,
// so a partial sync would leave the unchanged ones stale.
func (f *familySync) localMatchChanged(st *proxier.State) bool {
	prev := f.w.node
	return prev != nil && st != nil && f.fc.localMatch(*prev) != f.fc.localMatch(st.Node)
}

// verify reports whether the table still holds what was written. It is
// cheap when nothing happened: if the ruleset generation is the one after
// our last commit, no program committed anything since. Otherwise it
// counts the rules of every chain and the elements of every set (one
// dump each) and compares them with what was written: a deleted table, a
// flushed chain or a deleted element shows up as a difference, and the
// caller then rewrites everything.
func (f *familySync) verify(ctx context.Context, conn Conn) (bool, error) {
	gen, err := conn.Generation(ctx)
	if f.stamp.Untouched(uint64(gen), err == nil) {
		return true, nil
	}
	if _, exists, err := conn.ListObjects(ctx, f.fc.nft, TableName); err != nil {
		return false, fmt.Errorf("listing table: %w", err)
	} else if !exists {
		klog.InfoS("nftables table is gone; rewriting it", "family", f.fc.nft, "table", TableName)
		return false, nil
	}
	counts, err := conn.Counts(ctx, f.fc.nft, TableName)
	if err != nil {
		return false, fmt.Errorf("counting table contents: %w", err)
	}
	if what := f.mismatch(counts); what != "" {
		klog.InfoS("nftables table differs from what was written; rewriting it", "family", f.fc.nft, "difference", what)
		return false, nil
	}
	f.stamp.Record(uint64(gen), true, true)
	return true, nil
}

// untouched reports whether the ruleset generation is still the one after
// our last commit: nobody else committed since. (A commit racing between
// this read and ours is taken for ours.)
func (f *familySync) untouched(ctx context.Context, conn Conn) bool {
	gen, err := conn.Generation(ctx)
	return f.stamp.Untouched(uint64(gen), err == nil)
}

// mismatch names the first difference between the counts and what was
// written, or "".
func (f *familySync) mismatch(c TableCounts) string {
	found, first := 0, ""
	for name, got := range c.Rules {
		n, ok := f.w.rules.get(name)
		if !ok {
			continue
		}
		found++
		if got != n && (first == "" || name < first) {
			first = name
		}
	}
	if first != "" {
		n, _ := f.w.rules.get(first)
		return fmt.Sprintf("chain %s has %d rules, %d written", first, c.Rules[first], n)
	}
	if found < len(f.w.rules) {
		return fmt.Sprintf("%d of the %d chains written are gone", len(f.w.rules)-found, len(f.w.rules))
	}
	for _, name := range slices.Sorted(maps.Keys(f.w.counts)) {
		if got, n := c.Elements[name], f.w.counts[name]; got != n {
			return fmt.Sprintf("set %s has %d elements, %d written", name, got, n)
		}
	}
	return ""
}
