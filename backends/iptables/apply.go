package iptables

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/shrink"
	"github.com/switchyard-proxy/switchyard/internal/synctrace"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// installedChain is what this mode believes one of its chains holds in the
// kernel: a fingerprint of the rules it last wrote there (known is false
// when a failed restore may or may not have applied them) and how many.
// With iptables-nft, inbound is the number of jumps to it last seen in
// the kernel, when inboundKnown (see verify_counts.go).
type installedChain struct {
	hash         uint64
	rules        int
	inbound      int32
	known        bool
	inboundKnown bool
}

// familySync applies rulesets of one IP family. It remembers what it
// wrote, so a partial sync sends only the chains that changed and never
// reads the kernel's rules (iptables-save costs seconds on big tables).
type familySync struct {
	fam runner.Family
	fc  *familyConfig
	// prev is the ruleset of the last successful sync (with the rule text
	// of per-service chains dropped once applied); nil forces a full sync.
	prev *Ruleset
	// installed is every chain of ours believed to exist in the kernel.
	installed     map[chainKey]installedChain
	installedPeak shrink.Peak
	// tableRules counts the rules of installed, per table.
	tableRules map[table]int
	// listed is set once the chains left by an earlier run (of switchyard
	// or kube-proxy) were listed, so the first full sync can delete them.
	listed bool
	// verifiedAt is when the top-level chains were last verified or
	// rewritten (see verify.go).
	verifiedAt time.Time
	// fp tells whether anyone else wrote since the last sync.
	fp fingerprintState
	// repair, set by a verification that found a few chains changed
	// behind our back, makes this partial sync rewrite them.
	repair *repairPlan
	// damaged is set when this sync's verification found our rules
	// changed by someone else: the sync, full or repairing, restores them.
	damaged bool
	// counters keeps the service traffic ipsets (nil when not counting).
	counters *counterSetsSync
}

func newFamilySync(fam runner.Family, fc *familyConfig) *familySync {
	return &familySync{fam: fam, fc: fc, installed: map[chainKey]installedChain{}, tableRules: map[table]int{}}
}

// syncOutcome reports one family's sync.
type syncOutcome struct {
	full    bool
	written map[table]int // rule lines written, per table
}

// sync makes the kernel match state: a partial sync when the previous one
// succeeded, the Diff allows it and the canary chains are still there,
// else a full one. On error the next sync is full.
func (f *familySync) sync(ctx context.Context, b *Backend, state *proxier.State, diff *proxier.Diff) (syncOutcome, error) {
	full, reason := f.fullSyncReason(ctx, b, state, diff)
	out := syncOutcome{full: full, written: map[table]int{}}
	var txs []*transaction
	var rs *Ruleset
	if full {
		klog.V(3).InfoS("iptables full sync", "family", f.fam, "reason", reason)
		var err error
		if rs, txs, err = f.planFull(ctx, b, state); err != nil {
			f.prev = nil
			return out, err
		}
	} else {
		rs = renderPartial(f.fc, state, f.repair.widen(diff), f.prev)
		writes, deletes := f.partialChanges(rs)
		writes = f.repair.addChains(rs, writes)
		txs = planTransactions(writes, deletes, b.chunkRules())
	}
	f.repair = nil
	f.prev = nil // until this sync succeeds
	err := f.apply(ctx, b, txs, out.written, !full)
	f.installed = shrink.Map(f.installed, &f.installedPeak)
	if err != nil {
		return out, err
	}
	f.prev = compact(rs)
	return out, nil
}

// planFull renders state sealed (sealed.go) and plans the full sync's
// transactions.
func (f *familySync) planFull(ctx context.Context, b *Backend, state *proxier.State) (*Ruleset, []*transaction, error) {
	// Render (pure CPU) while prepareFull waits for iptables.
	rendered := make(chan *Ruleset, 1)
	go func() { rendered <- renderSealed(f.fc, state) }()
	plan, err := f.prepareFull(ctx, b.runner)
	rs := <-rendered
	if err == nil && !plan.targetsIn(rs) {
		plan, err = firstSyncPlan{}, f.ensureJumps(b.runner)
	}
	if err != nil {
		return nil, nil, err
	}
	bound := b.chunkRules()
	if plan.onlyOneTransaction(allTables()) {
		bound = 0
	}
	chains := rs.chains()
	f.reserveInstalled(len(chains))
	txs := plan.attach(planTransactions(chains, f.staleChains(chains), bound))
	x := newRerenderer(f.fc, state)
	for _, tx := range txs {
		tx.rerender = x
	}
	f.verifiedAt = b.verify.Now()
	return rs, txs, nil
}

// reserveInstalled sizes the record of installed chains for n chains
// before a full sync fills it: grown insert by insert, the map of a first
// sync at 10k services x 10 endpoints (~130k chains) allocates about
// twice its final size on the way.
func (f *familySync) reserveInstalled(n int) {
	if len(f.installed) >= n/2 {
		return
	}
	m := make(map[chainKey]installedChain, n)
	maps.Copy(m, f.installed)
	f.installed = m
}

// fullSyncReason says whether this sync must be full, and why.
func (f *familySync) fullSyncReason(ctx context.Context, b *Backend, state *proxier.State, diff *proxier.Diff) (bool, string) {
	f.repair, f.damaged = nil, false
	switch {
	case f.prev == nil:
		return true, "first sync or previous sync failed"
	case diff == nil || diff.Full:
		return true, "requested"
	case !slices.Equal(f.prev.node, nodeAddrs(nodeOf(state), f.fc.family)):
		return true, "node addresses changed"
	case f.prev.local != f.fc.localDetector.Match(f.fc.family, nodeOf(state)):
		// NodeCIDR mode: the node's pod CIDRs arrived or changed.
		return true, "local-traffic match changed"
	}
	if !b.verify.Due(diff, f.verifiedAt) {
		// Canary and chain checks run on periodic syncs only: on legacy
		// iptables each check reads a whole table (1.5 s per sync at 10k
		// services), and a tampered table is still repaired within one
		// sync period.
		return false, ""
	}
	if f.fp.untouched {
		// Nobody wrote since our last sync: the canaries and chains are
		// as we left them (see fingerprint.go).
		f.verifiedAt = b.verify.Now()
		return false, ""
	}
	f.fp.compared = true // a full sync or a repair follows any mismatch
	full, reason := f.checkDamage(ctx, b, diff)
	f.damaged = full || f.repair != nil
	return full, reason
}

// checkDamage verifies the family's rules: a reason for a full sync, or a
// repair plan (f.repair) for a few changed chains, or nothing.
func (f *familySync) checkDamage(ctx context.Context, b *Backend, diff *proxier.Diff) (bool, string) {
	r := b.runner
	if reason, counted := f.verifyByCounts(ctx, b); counted {
		return reason != "", reason
	}
	for _, t := range allTables() {
		ok, err := r.ChainExists(f.fam, string(t), chainCanary)
		if err != nil || !ok {
			// Someone flushed our tables (firewalld reload, iptables -F -X):
			// everything must be rewritten.
			klog.InfoS("iptables canary chain gone, doing a full sync", "family", f.fam, "table", t, "err", err)
			return true, "canary chain gone"
		}
	}
	if reason := f.verifyReason(ctx, b, diff); reason != "" {
		return true, reason
	}
	return false, ""
}

// prepareFull ensures the jumps from the built-in chains (outside the
// restore payload: other programs own those chains). The first full sync
// instead saves each table once, which also lists the chains an earlier
// run left behind, and returns the plan that adds the missing jumps in
// its own restore (firstsync.go).
func (f *familySync) prepareFull(ctx context.Context, r runner.Interface) (firstSyncPlan, error) {
	if !f.listed {
		if plan, ok := f.surveyTables(ctx, r); ok {
			return plan, nil
		}
	}
	return firstSyncPlan{}, f.ensureJumps(r)
}

// ensureJumps checks and adds each jump, one iptables call at a time.
func (f *familySync) ensureJumps(r runner.Interface) error {
	for _, j := range jumpRules(f.fc.localhostNodePorts, f.fc.serviceTraffic, f.fam == runner.IPv4) {
		if _, err := r.EnsureChain(f.fam, string(j.table), j.to); err != nil {
			return fmt.Errorf("iptables backend: %s: ensure chain %s/%s: %w", f.fam, j.table, j.to, err)
		}
		if _, err := r.EnsureRule(f.fam, runner.Prepend, string(j.table), j.from, j.args...); err != nil {
			return fmt.Errorf("iptables backend: %s: ensure jump %s/%s -> %s: %w", f.fam, j.table, j.from, j.to, err)
		}
	}
	return nil
}

// noteLeftovers records the service chains an iptables-save of nat shows
// (left by an earlier run of switchyard or kube-proxy), so the first full
// sync deletes those it does not write.
func (f *familySync) noteLeftovers(data []byte) {
	for _, name := range chainsInSave(data) {
		k := chainKey{table: tableNAT, name: name}
		if _, ok := f.installed[k]; !ok && isServiceChain(name) {
			f.installed[k] = installedChain{}
		}
	}
	f.listed = true
}

// staleChains are the installed service chains not among chains (none
// on a first sync into empty tables, which then builds no set).
func (f *familySync) staleChains(chains []*chainRules) []chainKey {
	var out []chainKey
	for k := range f.installed {
		if isServiceChain(k.name) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	want := make(map[chainKey]bool, len(chains))
	for _, c := range chains {
		want[c.key] = true
	}
	out = slices.DeleteFunc(out, func(k chainKey) bool { return want[k] })
	slices.SortFunc(out, compareKeys)
	return out
}

func compareKeys(a, b chainKey) int {
	if a.table != b.table {
		if a.table < b.table {
			return -1
		}
		return 1
	}
	if a.name < b.name {
		return -1
	} else if a.name > b.name {
		return 1
	}
	return 0
}

// apply runs the transactions in order, recording each one that
// committed. It stops at the first failure: the transactions before it
// committed, ordering kept every reference valid, and the rules in force
// are a consistent mix of old and new.
func (f *familySync) apply(ctx context.Context, b *Backend, txs []*transaction, written map[table]int, partial bool) error {
	for i, tx := range txs {
		tx.byName = b.runner.Mode() == runner.ModeLegacy
		payload, err := f.restore(ctx, b.runner, tx)
		if err != nil {
			b.countRestoreFailure(f.fc.family, partial)
			klog.ErrorS(err, "iptables-restore failed", "family", f.fam, "transaction", i+1, "of", len(txs),
				"partial", partial, "lines", runner.OffendingLinesFrom(payload, err))
			if !f.commitWithoutDeletes(ctx, b, tx, payload, err) {
				f.recordUncertain(tx)
				return fmt.Errorf("iptables backend: %s: restore %d of %d: %w", f.fam, i+1, len(txs), err)
			}
		} else {
			f.record(tx)
		}
		for t, n := range tx.rulesWritten() {
			written[t] += n
		}
	}
	return nil
}

// restore runs one transaction and returns what writes its payload
// again, for the lines a failure blames. A runner that can streams the
// payload into iptables-restore as it is written: the payload of a first
// sync is as big as the rules it is written from, and was held beside
// them (10k services x 10 endpoints: ~40 MB), plus a copy in a memfd. The
// same transaction writes the same bytes again.
func (f *familySync) restore(ctx context.Context, r runner.Interface, tx *transaction) (io.WriterTo, error) {
	if sr, ok := r.(runner.StreamRestorer); ok {
		// The render mark is the time to the first byte; the payload is
		// rendered while iptables-restore reads it, under "commit".
		synctrace.Mark(ctx, "render")
		err := sr.RestoreFrom(ctx, f.fam, tx)
		synctrace.Mark(ctx, "commit")
		return tx, err
	}
	data := tx.payload()
	synctrace.Mark(ctx, "render")
	err := r.Restore(ctx, f.fam, data)
	synctrace.Mark(ctx, "commit")
	return runner.PayloadBytes(data), err
}

// record notes a committed transaction.
func (f *familySync) record(tx *transaction) {
	for _, c := range tx.writes {
		f.setInstalled(c.key, installedChain{hash: c.hash(), known: true, rules: c.ruleCount()})
	}
	for _, k := range tx.deletes {
		f.setInstalled(k, installedChain{})
		delete(f.installed, k)
	}
}

// recordUncertain notes a failed transaction. A table committed before
// the failing one may have applied: its written chains may exist with
// unknown content, its deleted chains may still exist. The next sync is
// full and settles both.
func (f *familySync) recordUncertain(tx *transaction) {
	for _, c := range tx.writes {
		f.setInstalled(c.key, installedChain{rules: c.ruleCount()})
	}
	f.prev = nil
}

// setInstalled records what a chain now holds. The jumps to a rewritten
// chain come from other chains: their learnt count stays.
func (f *familySync) setInstalled(k chainKey, c installedChain) {
	old := f.installed[k]
	f.tableRules[k.table] += c.rules - old.rules
	c.inbound, c.inboundKnown = old.inbound, old.inboundKnown
	f.installed[k] = c
}

// chainsInSave lists the chains declared in iptables-save output.
func chainsInSave(data []byte) []string { return runner.SavedChains(data) }
