package iptables

import (
	"context"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// One family's sync, top-down: decide what this sync does (full,
// partial, or partial with a repair), plan its transactions from a pure
// render (render.go, payload.go), apply them (apply.go), and keep what
// the next sync diffs against.
//
// When to check the kernel is reconcile.Cadence's: a periodic sync
// (Diff.Verify), or any partial sync once the last check is older than
// the interval. The canary chains only reveal a deleted table or chain
// (`iptables -X`, a firewalld reload); an operator's `iptables -t nat
// -F`, `-F KUBE-SERVICES` or `-D KUBE-SERVICES ...` leaves them in place
// while every service stops working, and partial syncs never rewrite an
// unchanged chain. So the check reads nothing while the fingerprint
// shows no other writer (fingerprint.go); otherwise every chain's rule
// count is compared with what was written, read without iptables-save
// (verify.go), and the chains found changed are rewritten by the same
// sync (repair.go). With a runner that cannot count rules, the top-level
// chains are listed one by one and nat is saved once (verify_list.go),
// and a mismatch turns the sync into a full one.

// familySync keeps the rules of one IP family. It remembers what it
// wrote, so a partial sync sends only the chains that changed and never
// reads the kernel's rules.
type familySync struct {
	fam runner.Family
	fc  *familyConfig
	// jumps are the family's jumps from the built-in chains.
	jumps []jumpRule
	// prev is the ruleset of the last successful sync (with the rule text
	// of per-service chains dropped once applied), what a partial sync
	// diffs against; nil forces a full sync.
	prev *Ruleset
	// installed is every chain of ours believed to exist in the kernel.
	installed *installedChains
	// listed is set once the chains left by an earlier run (of switchyard
	// or kube-proxy) were listed, so the first full sync can delete them.
	listed bool
	// verifiedAt is when the chains were last verified or rewritten.
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
	return &familySync{fam: fam, fc: fc, installed: newInstalledChains(),
		jumps: jumpRules(fc.localhostNodePorts, fc.serviceTraffic, fam == runner.IPv4)}
}

// syncOutcome reports one family's sync.
type syncOutcome struct {
	full    bool
	written map[table]int // rule lines written, per table
}

// sync makes the kernel match state: a partial sync when the previous one
// succeeded, the Diff allows it and the kernel still holds our rules,
// else a full one. On error the next sync is full.
func (f *familySync) sync(ctx context.Context, b *Backend, state *proxier.State, diff *proxier.Diff) (syncOutcome, error) {
	full, reason := f.decide(ctx, b, state, diff)
	out := syncOutcome{full: full, written: map[table]int{}}
	var rs *Ruleset
	var txs []*transaction
	var err error
	if full {
		klog.V(3).InfoS("iptables full sync", "family", f.fam, "reason", reason)
		rs, txs, err = f.planFull(ctx, b, state)
	} else {
		rs, txs = f.planPartial(b, state, diff)
	}
	f.repair = nil
	// No baseline until this sync succeeds, so the next sync is full. The
	// proxier's runner also asks for a full sync after a failure, but this
	// is no duplicate: once an apply failed half-way (some transactions
	// committed, the failing one perhaps in part), prev, what a partial
	// sync diffs against, no longer describes the kernel, and the Diff a
	// caller retries with names what changed in the State, not what this
	// family chose to rewrite (a full sync for a canary gone, a repair).
	// So a retry with a partial Diff is full too (TestFailedRestoreKeepsRules).
	f.prev = nil
	if err != nil {
		return out, err
	}
	err = f.apply(ctx, b, txs, out.written, !full)
	f.installed.shrink()
	if err != nil {
		return out, err
	}
	f.prev = rs.compact()
	return out, nil
}

// decide says whether this sync must be full, and why. A sync due to
// verify (reconcile.Cadence) whose fingerprint moved checks the kernel
// first, which may make it full or give it chains to repair (f.repair).
func (f *familySync) decide(ctx context.Context, b *Backend, state *proxier.State, diff *proxier.Diff) (bool, string) {
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
		// as we left them.
		f.verifiedAt = b.verify.Now()
		return false, ""
	}
	f.fp.compared = true // a full sync or a repair follows any mismatch
	full, reason := f.verify(ctx, b)
	f.damaged = full || f.repair != nil
	return full, reason
}

// verify checks the family's rules in the kernel: by rule counts when the
// runner can read them (verify.go), else the canaries and, when the
// runner can list chains, a listing (verify_list.go).
func (f *familySync) verify(ctx context.Context, b *Backend) (bool, string) {
	if c, ok := newCountCheck(b.runner, f.fam, f.jumps, f.installed); ok {
		f.verifiedAt = b.verify.Now()
		reason, damaged, err := c.run(ctx)
		return f.judge(reason, damaged, err)
	}
	c := listCheck{r: b.runner, fam: f.fam, jumps: f.jumps, installed: f.installed}
	if reason := c.canaries(); reason != "" {
		return true, reason
	}
	saved := &savedTables{r: b.runner, saved: map[string][]byte{}}
	l, ok := c.lister(saved)
	if !ok {
		return false, ""
	}
	f.verifiedAt = b.verify.Now()
	reason, err := c.run(ctx, l, saved)
	return f.judge(reason, nil, err)
}

// judge turns what a check found into this sync's course: a full sync
// (reason), a repair of the few chains that changed by this partial sync
// (f.repair), or nothing. A check that failed is no reason: a full sync
// would fail the same way, and the next check retries.
func (f *familySync) judge(reason string, damaged []chainKey, err error) (bool, string) {
	if err != nil {
		klog.V(2).InfoS("Cannot verify iptables chains; will retry", "family", f.fam, "err", err)
		return false, ""
	}
	if reason == "" && len(damaged) > 0 {
		if f.repair, reason = planRepair(f.prev, damaged); f.repair != nil {
			f.installed.forget(damaged)
			klog.InfoS("iptables chains were changed outside switchyard; rewriting them", "family", f.fam,
				"chains", len(damaged), "first", string(damaged[0].table)+"/"+damaged[0].name)
			return false, ""
		}
	}
	if reason == "" {
		return false, ""
	}
	klog.InfoS("iptables rules were changed outside switchyard; doing a full sync", "family", f.fam, "found", reason)
	return true, "rules changed outside switchyard: " + reason
}

// planFull renders state sealed (sealed.go) and plans the full sync's
// transactions: every chain, bottom-up, then the deletion of the service
// chains no longer rendered.
func (f *familySync) planFull(ctx context.Context, b *Backend, state *proxier.State) (*Ruleset, []*transaction, error) {
	// Render (pure CPU) while prepareFull waits for iptables.
	rendered := make(chan *Ruleset, 1)
	go func() { rendered <- renderSealed(f.fc, state) }()
	plan, err := f.prepareFull(ctx, b.runner)
	rs := <-rendered
	if err == nil && !plan.targetsIn(rs) {
		plan, err = firstSyncPlan{}, ensureJumps(b.runner, f.fam, f.jumps)
	}
	if err != nil {
		return nil, nil, err
	}
	bound := b.chunkRules
	if plan.onlyOneTransaction(allTables()) {
		bound = 0
	}
	chains := rs.chains()
	f.installed.reserve(len(chains))
	txs := plan.attach(planTransactions(chains, f.installed.stale(chains), bound))
	x := newRerenderer(f.fc, state)
	for _, tx := range txs {
		tx.rerender = x
	}
	f.verifiedAt = b.verify.Now()
	return rs, txs, nil
}

// prepareFull ensures the jumps from the built-in chains (outside the
// restore payload: other programs own those chains). The first full sync
// instead saves each table once, which also lists the chains an earlier
// run left behind, and returns the plan that adds the missing jumps in
// its own restore (firstsync.go).
func (f *familySync) prepareFull(ctx context.Context, r runner.Interface) (firstSyncPlan, error) {
	if !f.listed {
		if plan, ok := surveyTables(ctx, r, f.fam, f.jumps, f.installed); ok {
			f.listed = true
			return plan, nil
		}
	}
	return firstSyncPlan{}, ensureJumps(r, f.fam, f.jumps)
}

// planPartial re-renders only the service ports the Diff names, and those
// a repair adds, and plans what changed.
func (f *familySync) planPartial(b *Backend, state *proxier.State, diff *proxier.Diff) (*Ruleset, []*transaction) {
	rs := renderPartial(f.fc, state, f.repair.widen(diff), f.prev)
	writes, deletes := f.partialChanges(rs)
	writes = f.repair.addChains(rs, writes)
	return rs, planTransactions(writes, deletes, b.chunkRules)
}

// partialChanges lists what a partial sync writes and deletes: the chains
// of re-rendered service ports whose rules differ from what was last
// written, the top-level chains if they were rebuilt and differ, and the
// chains of re-rendered or removed service ports that went away. A
// one-endpoint change thus sends that service's KUBE-SVC chain and one
// KUBE-SEP chain, not the table; a new service adds its chains and its
// rules in the top-level chains, which are edited rather than rewritten
// (edits.go).
func (f *familySync) partialChanges(rs *Ruleset) (writes []*chainRules, deletes []chainKey) {
	for _, n := range rs.changed {
		cur, old := rs.services[n], f.prev.services[n]
		if cur != nil {
			for _, c := range cur.chains {
				if f.installed.differs(c) {
					writes = append(writes, c)
				}
			}
		}
		if old == nil {
			continue
		}
		for _, k := range old.chainKeys() {
			if cur == nil || !slices.ContainsFunc(cur.chains, func(x *chainRules) bool { return x.key == k }) {
				deletes = append(deletes, k)
			}
		}
	}
	if rs.dispatchRebuilt {
		for _, c := range rs.dispatch {
			if f.installed.differs(c) {
				writes = append(writes, editedChain(c, f.prev.topLevel(c.key), f.installed))
			}
		}
	}
	return writes, deletes
}
