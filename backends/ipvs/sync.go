package ipvs

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Sync renders state and makes the kernel match it. One sync decides
// whether it is full (fullSync) and whether it first verifies what the
// last sync left (reconcile.Cadence; verify), renders the ports it must
// into the model, then applies the model, and the repairs a verification
// found, kernel API by kernel API (apply). See the package doc for what a
// full and a partial sync do.
func (b *Backend) Sync(ctx context.Context, state *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	contexts := renderContexts(&b.cfg, state.Node)
	full := b.fullSync(diff, contexts)
	stamps := b.iptables.fingerprints(ctx) // before this sync writes
	var dmg *damage                        // nil: not verified
	var verifyTook time.Duration
	if !full && b.cadence.Due(diff, b.verifiedAt) {
		start := b.clock.Now()
		dmg = b.verify(ctx, stamps)
		verifyTook = b.clock.Since(start)
	}
	t := renderPorts(b.model, state, portsToRender(b.model, state, diff, full), contexts)
	dmg.widen(t)
	st, err := b.apply(ctx, state.Node, t, full, dmg)
	if err != nil {
		b.iptables.forgetStamps()
		return proxier.SyncResult{Full: full}, fmt.Errorf("ipvs sync: %w", err)
	}
	b.synced = b.synced || full
	b.iptables.recordStamps(ctx, stamps, dmg, full)
	if full || dmg != nil {
		b.verifiedAt = b.clock.Now()
	}
	b.repairs.record(dmg)
	klog.V(2).InfoS("IPVS sync done", append([]any{"full", full, "verified", dmg != nil, "repaired", dmg.any(),
		"virtualServersChecked", st.servers, "ipsetLines", st.setLines, "iptablesWritten", st.iptables,
		"draining", b.graceful.len(), "verifyTook", verifyTook}, st.took...)...)
	return proxier.SyncResult{Full: full}, nil
}

// fullSync says whether this sync lists and rewrites everything: asked
// for (diff.Full), the first since New or Cleanup, or the node's NodePort
// addresses moved (every NodePort virtual server moves). It records those
// addresses.
//
// A failed sync needs no flag of its own here, though its render already
// moved the model on: the runner makes the next sync full
// (proxier.Backend: "On error the runner retries with a full sync").
func (b *Backend) fullSync(diff *proxier.Diff, contexts map[v1.IPFamily]*renderContext) bool {
	moved := b.nodeAddrsChanged(contexts) // always record them
	return diff == nil || diff.Full || !b.synced || moved
}

// nodeAddrsChanged records the NodePort addresses of each family and
// reports a change.
func (b *Backend) nodeAddrsChanged(contexts map[v1.IPFamily]*renderContext) bool {
	changed := false
	for f, rc := range contexts {
		if !slices.Equal(b.nodeAddrs[f], rc.nodeAddrs) {
			changed = true
			b.nodeAddrs[f] = rc.nodeAddrs
		}
	}
	return changed
}

// verify compares the kernel with the model as the last sync left it
// (before this sync renders, so this sync's own changes do not count as
// damage), each applier reading back its kernel API (verify.go). A piece
// that cannot be read is skipped with a log line: the next check
// retries, and a repair would fail the same way.
func (b *Backend) verify(ctx context.Context, stamps map[v1.IPFamily]fingerprint) *damage {
	d, m := newDamage(), b.model
	checks := []struct {
		what string
		fn   func() error
	}{
		{"iptables", func() error {
			for _, f := range b.cfg.families() {
				b.iptables.verify(ctx, f, stamps[f], d)
			}
			return nil
		}},
		{"ipsets", func() error { return b.sets.verify(ctx, m, d) }},
		{"kube-ipvs0", func() error { return b.addrs.verify(m, d) }},
		{"IPVS table", func() error { return b.servers.verify(m, d) }},
	}
	var took []any
	for _, c := range checks {
		start := b.clock.Now()
		if err := c.fn(); err != nil {
			klog.V(2).InfoS("Cannot verify IPVS mode kernel state; will retry", "what", c.what, "err", err)
		}
		took = append(took, c.what, b.clock.Since(start))
	}
	klog.V(2).InfoS("Verified IPVS mode kernel state", took...)
	d.log()
	return d
}

// apply makes the kernel match the model: sets first (rules match on
// them), then virtual servers, addresses and rules, then draining real
// servers. d (may be nil) adds the repairs a verification found needed.
// The first full sync sets the sysctls and IPVS timeouts up first.
func (b *Backend) apply(ctx context.Context, node proxier.NodeInfo, t *touched, full bool, d *damage) (applyStats, error) {
	var st applyStats
	if full && !b.setupDone {
		if err := setupKernel(&b.cfg); err != nil {
			return st, err
		}
		b.setupDone = true
	}
	m := b.model
	phases := []struct {
		key string
		fn  func() error
	}{
		{"setsTook", func() (err error) { st.setLines, err = b.sets.sync(ctx, m, t, full, d.repairSetLines()); return err }},
		{"serversTook", func() (err error) { st.servers, err = b.servers.sync(m, t.servers, full); return err }},
		{"addressesTook", func() error { return b.addrs.sync(m, t, full || d.repairAddresses()) }},
		{"iptablesTook", func() (err error) {
			st.iptables, err = b.iptables.sync(ctx, iptablesPayloads(&b.cfg, node, m), full, d.rewriteIPTables())
			return err
		}},
		{"drainTook", func() error { return wrapErr("graceful termination", b.graceful.reap()) }},
	}
	for _, p := range phases {
		if err := st.timed(b.clock, p.key, p.fn); err != nil {
			return st, err
		}
	}
	return st, nil
}

// applyStats are counts and phase durations for the sync log line.
type applyStats struct {
	servers, setLines int
	iptables          bool
	took              []any // "setsTook", d, ... (klog key/values)
}

// timed runs a phase and records its duration under key.
func (st *applyStats) timed(clk clock.PassiveClock, key string, fn func() error) error {
	start := clk.Now()
	err := fn()
	st.took = append(st.took, key, clk.Since(start))
	return err
}
