package ipvs

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Backend is the IPVS proxy mode.
type Backend struct {
	cfg   Config
	k     *Kernel
	clock clock.PassiveClock

	mu          sync.Mutex // serialises Sync and Cleanup
	model       *model
	marks       *markAllocator
	graceful    *gracefulQueue
	static      map[v1.IPFamily]staticRules
	lastPayload map[v1.IPFamily][]byte
	nodeAddrs   map[v1.IPFamily][]netip.Addr
	fp          map[v1.IPFamily]reconcile.Stamp // iptables fingerprints known to be ours (verify_iptables.go)
	verifiedAt  time.Time                       // last verification or full sync
	// repairs is the deprecated switchyard_ipvs_state_repaired_total,
	// kept beside rulesRepaired for one release.
	repairs       *prometheus.CounterVec
	rulesRepaired *reconcile.Repairs
	cadence       reconcile.Cadence
	synced        bool // a full sync succeeded since New or Cleanup
	failed        bool // the last sync failed: the next one is full
	setupDone     bool
}

var _ proxier.Backend = (*Backend)(nil)

// New builds the backend. It does not touch the kernel: the first Sync
// sets everything up. It registers the switchyard_ipvs_* collector with
// cfg.Registerer, if any.
func New(cfg Config) (*Backend, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, k: cfg.Kernel, clock: cfg.Clock, repairs: newRepairCounter()}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	b.cadence = reconcile.NewCadence(cfg.VerifyInterval, b.clock)
	var err error
	if b.rulesRepaired, err = reconcile.NewRepairs(cfg.Registerer, "ipvs", cfg.families()); err != nil {
		return nil, fmt.Errorf("ipvs backend: register metrics: %w", err)
	}
	b.reset()
	b.static = map[v1.IPFamily]staticRules{}
	for _, f := range cfg.families() {
		b.static[f] = renderStatic(&b.cfg, f, cfg.LocalDetector.Match(f, proxier.NodeInfo{}))
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{newCollector(cfg.IPVS), b.repairs} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("ipvs backend: register metrics: %w", err)
			}
		}
	}
	return b, nil
}

// reset forgets everything known about the kernel.
func (b *Backend) reset() {
	b.model = newModel()
	b.marks = newMarkAllocator(b.cfg.internalMarkMask())
	b.graceful = newGracefulQueue()
	b.lastPayload = map[v1.IPFamily][]byte{}
	b.nodeAddrs = map[v1.IPFamily][]netip.Addr{}
	b.fp = map[v1.IPFamily]reconcile.Stamp{}
	b.synced = false
}

// Name is the proxy mode.
func (b *Backend) Name() string { return "ipvs" }

// Sync renders state and makes the kernel match it. See the package doc
// for what a full and a partial sync do.
func (b *Backend) Sync(ctx context.Context, state *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	contexts := b.renderContexts(state)
	moved := b.nodeAddrsChanged(contexts) // always record them
	for _, f := range b.cfg.families() {
		// NodeCIDR local-traffic detection follows the node's pod CIDRs;
		// a changed payload is restored like any other change.
		b.static[f] = renderStatic(&b.cfg, f, b.cfg.LocalDetector.Match(f, state.Node))
	}
	full := diff == nil || diff.Full || !b.synced || b.failed || moved
	fps := b.readFingerprints(ctx)
	var dmg *damage // nil: not verified (verify.go)
	var verifyTook time.Duration
	if !full && b.verifyDue(diff) {
		start := b.clock.Now()
		dmg = b.verify(ctx, fps)
		verifyTook = b.clock.Since(start)
	}
	t := b.render(state, diff, contexts, full)
	dmg.widen(t)
	st, err := b.apply(ctx, t, full, dmg)
	b.failed = err != nil
	if err != nil {
		b.fp = map[v1.IPFamily]reconcile.Stamp{}
		return proxier.SyncResult{Full: full}, fmt.Errorf("ipvs sync: %w", err)
	}
	b.synced = b.synced || full
	b.recordFingerprints(ctx, fps, dmg, full)
	if full || dmg != nil {
		b.verifiedAt = b.clock.Now()
	}
	b.countRepairs(dmg)
	klog.V(2).InfoS("IPVS sync done", append([]any{"full", full, "verified", dmg != nil, "repaired", dmg.any(),
		"virtualServersChecked", st.servers, "ipsetLines", st.setLines, "iptablesWritten", st.iptables,
		"draining", b.graceful.len(), "verifyTook", verifyTook}, st.took...)...)
	return proxier.SyncResult{Full: full}, nil
}

func (b *Backend) renderContexts(state *proxier.State) map[v1.IPFamily]*renderContext {
	out := map[v1.IPFamily]*renderContext{}
	for _, f := range b.cfg.families() {
		out[f] = &renderContext{family: f, scheduler: b.cfg.scheduler(), node: state.Node,
			nodeAddrs: nodePortAddrs(state.Node.Addresses, f, b.cfg.nodePortPrefixes(f)),
			markMask:  b.cfg.internalMarkMask()}
	}
	return out
}

// nodePortAddrs are the node's addresses of the family that NodePorts
// listen on.
func nodePortAddrs(all []netip.Addr, f v1.IPFamily, prefixes []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, a := range all {
		a = a.Unmap()
		if proxier.FamilyOf(a) != f {
			continue
		}
		if prefixes == nil || slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// nodeAddrsChanged records the NodePort addresses and reports a change
// (every NodePort virtual server moves: a full sync).
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

// render updates the model: every port on a full sync, the ports the
// diff names otherwise.
func (b *Backend) render(state *proxier.State, diff *proxier.Diff, contexts map[v1.IPFamily]*renderContext, full bool) *touched {
	t := newTouched()
	names := map[proxier.ServicePortName]struct{}{}
	if full {
		for k := range b.model.ports {
			names[k.Name] = struct{}{}
		}
		for n := range state.Services {
			names[n] = struct{}{}
		}
	} else if diff != nil {
		names = diff.Changed
	}
	for n := range names {
		for f, rc := range contexts {
			k := portKey{Family: f, Name: n}
			sp := state.Services[n]
			if sp == nil {
				b.marks.release(k)
				b.model.set(k, nil, t)
				continue
			}
			mark := uint32(0)
			if needsMark(rc, sp) {
				if mark = b.marks.get(k); mark == 0 {
					klog.InfoS("No internal-traffic mark left: pods reach only local endpoints through external addresses",
						"servicePort", k, "mask", fmt.Sprintf("%#x", b.cfg.internalMarkMask()))
				}
			} else {
				b.marks.release(k)
			}
			b.model.set(k, renderPort(rc, sp, state.Endpoints[n], mark), t)
		}
	}
	b.model.compact()
	return t
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

// apply makes the kernel match the model: sets first (rules match on
// them), then virtual servers, addresses and rules, then draining real
// servers. d (may be nil) adds the repairs a verification found needed.
func (b *Backend) apply(ctx context.Context, t *touched, full bool, d *damage) (applyStats, error) {
	var st applyStats
	if full && !b.setupDone {
		if err := b.setup(); err != nil {
			return st, err
		}
		b.setupDone = true
	}
	clk := b.clock
	phases := []struct {
		key string
		fn  func() error
	}{
		{"setsTook", func() (err error) { st.setLines, err = b.syncSets(ctx, t, full, d.repairSetLines()); return err }},
		{"serversTook", func() (err error) { st.servers, err = b.syncServers(t.servers, full); return err }},
		{"addressesTook", func() error { return b.syncAddresses(t, full || d.repairAddresses()) }},
		{"iptablesTook", func() (err error) { st.iptables, err = b.syncIPTables(ctx, full, d.rewriteIPTables()); return err }},
		{"drainTook", func() error { return wrapErr("graceful termination", b.reap()) }},
	}
	for _, p := range phases {
		if err := st.timed(clk, p.key, p.fn); err != nil {
			return st, err
		}
	}
	return st, nil
}
