package userspace

import (
	"context"
	"errors"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Sync implements proxier.Backend: it opens the proxy sockets new service
// ports need, swaps every socket's endpoints, rewrites the rules of each
// family (one restore, skipped when unchanged unless the sync is full or
// a check finds them damaged: see syncFamilyLocked), and only then closes
// the sockets of service ports that are gone, and deletes the conntrack
// entries of UDP ports that closed or lost their last endpoint. If a
// socket cannot be opened or a restore fails, the previous rules stay in
// force and every socket they use stays open; a failed conntrack delete
// is reported after the rules were applied and retried by the next sync.
func (b *Backend) Sync(ctx context.Context, st *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return proxier.SyncResult{}, errors.New("userspace: sync after Close")
	}
	if diff == nil {
		diff = &proxier.Diff{Full: true}
	}
	b.skipped.note(st, b.metrics.skipped)
	p := b.planLocked(st)
	if err := b.relays.open(p.specs); err != nil {
		return proxier.SyncResult{}, err
	}
	ports := b.relays.ports()
	b.openEarlySentinelsLocked(p.sentinels)
	res := proxier.SyncResult{Full: diff.Full}
	for _, fam := range b.cfg.Families {
		rc := b.renderConfig(fam, st)
		full, err := b.syncFamilyLocked(ctx, runnerFamily(fam), render(rc, p.plans[fam], ports), diff)
		if err != nil {
			return proxier.SyncResult{}, err
		}
		b.rendered[fam] = renderInput{rc: rc, plans: p.plans[fam]}
		res.Full = res.Full || full
	}
	b.afterRulesLocked(p)
	// The rules in force no longer lead to the flushed ports; a failed
	// flush is retried by the next sync.
	return res, b.relays.flush.run(b.cfg.Conntrack)
}

// syncPlan is what one sync wants: per family the service ports with
// their endpoint selections, the proxy sockets, the sentinels and where
// NodePorts are held (nil: unknown this sync).
type syncPlan struct {
	plans     map[v1.IPFamily][]servicePlan
	specs     map[socketKey]socketSpec
	sentinels map[sentinelKey]string
	npAddrs   map[v1.IPFamily][]netip.Addr
}

// planLocked plans the sync (plan.go holds the pure part).
func (b *Backend) planLocked(st *proxier.State) syncPlan {
	p := syncPlan{plans: map[v1.IPFamily][]servicePlan{}, specs: map[socketKey]socketSpec{}, sentinels: map[sentinelKey]string{}}
	var err error
	if p.npAddrs, err = nodePortAddrsOf(&b.cfg); err != nil {
		// NodePorts then have no sentinel (their traffic takes the kernel
		// fallback) and keep their reservations until the next sync.
		klog.ErrorS(err, "Cannot list local addresses for --nodeport-addresses; NodePort sentinels and reservations left for the next sync")
		p.npAddrs = nil
	}
	for _, fam := range b.cfg.Families {
		p.plans[fam] = planFamily(st, fam, b.cfg.LocalDetector.Match(fam, st.Node).ByInterface())
		addSpecs(p.specs, p.plans[fam], insideOf(&b.cfg, fam, st))
		if b.cfg.RestartFallback {
			sentinelKeys(p.sentinels, p.plans[fam], p.npAddrs[fam])
		}
	}
	return p
}

// renderConfig is what fam's rules are rendered with.
func (b *Backend) renderConfig(fam v1.IPFamily, st *proxier.State) renderConfig {
	return renderConfig{family: fam, listenIP: b.cfg.listenIP(fam),
		hostIP: b.cfg.hostIP(fam, st.Node.Addresses), local: b.cfg.LocalDetector.Match(fam, st.Node),
		nodePods:         nodePodCIDR(fam, st.Node.PodCIDRs),
		nodePortPrefixes: proxier.PrefixesOfFamily(b.cfg.NodePortAddresses, fam),
		mark:             b.cfg.mark(), masqMark: b.cfg.masqMark(), fallback: b.cfg.RestartFallback}
}

// nodePodCIDR is the node's pod CIDR of fam (invalid when none).
func nodePodCIDR(fam v1.IPFamily, cidrs []netip.Prefix) netip.Prefix {
	for _, p := range cidrs {
		if familyOf(p.Addr()) == fam {
			return p
		}
	}
	return netip.Prefix{}
}

// openEarlySentinelsLocked opens the UDP sentinels that may precede the
// rules (sentinelSet.early), releasing their NodePorts' holders first.
func (b *Backend) openEarlySentinelsLocked(want map[sentinelKey]string) {
	early := b.sentinels.early(want, func(fam v1.IPFamily) bool { return len(b.applied[runnerFamily(fam)]) > 0 })
	if len(early) == 0 {
		return
	}
	b.holds.drop(func(k holdKey) bool {
		return sentinelHolds(k, func(sk sentinelKey) bool { _, ok := early[sk]; return ok })
	})
	b.sentinels.openMissing(early)
}

// afterRulesLocked does what waits for the rules to be in force: the
// sentinels, the NodePort holders, closing the sockets no longer wanted.
// A NodePort's sentinel holds its port: its holder is released first,
// the NodePorts without one reserved after.
func (b *Backend) afterRulesLocked(p syncPlan) {
	b.holds.drop(func(k holdKey) bool {
		return sentinelHolds(k, func(sk sentinelKey) bool { _, ok := p.sentinels[sk]; return ok })
	})
	b.sentinels.sync(p.sentinels)
	// Without the local addresses (npAddrs nil) the reservations stay.
	if b.cfg.PortReserver != nil && p.npAddrs != nil {
		b.holds.reserve(b.cfg.PortReserver, wantedHolds(b.cfg.Families, p.plans, p.npAddrs), b.sentinels.has, b.metrics.unreserved)
	}
	b.relays.retire(p.specs)
}

// syncFamilyLocked applies one family's payload, fully when diff asks for
// it or when a due check finds the rules damaged; it reports whether the
// sync was full. A repair is logged, with what it found, once applied.
//
// A sync skips the restore when the rules it renders are the ones it
// last wrote, so without a check nothing would put back rules someone
// removed: `iptables -t nat -F`, `iptables -F`, `-X`, or a firewall
// service reloading its tables leaves every service port unreachable
// while the proxy sockets keep listening. So the periodic sync
// (Diff.Verify), and any sync once the last check is older than
// Config.VerifyInterval (changes that keep arriving postpone the periodic
// one: reconcile.Cadence), checks the rules (damageLocked). Anything
// missing or changed turns the family's sync into a full one (restore and
// jumps); the sockets are not touched, so established connections, which
// conntrack keeps NATed, go on.
func (b *Backend) syncFamilyLocked(ctx context.Context, fam runner.Family, payload []byte, diff *proxier.Diff) (bool, error) {
	var d damage
	if !diff.Full && b.cadence.Due(diff, b.verifiedAt[fam]) {
		d = b.damageLocked(ctx, fam)
	}
	found := d.found()
	full := diff.Full || len(found) > 0
	if err := b.applyLocked(ctx, fam, payload, full); err != nil {
		return false, err
	}
	if full {
		b.verifiedAt[fam] = b.cadence.Now()
	}
	if len(found) > 0 {
		b.metrics.repairs.WithLabelValues(string(fam)).Inc()
		b.recordRepairs(fam, d)
		klog.InfoS("Restored userspace proxy rules changed outside switchyard", "family", fam, "repaired", found)
	}
	return full, nil
}

// recordRepairs counts a repair in switchyard_rules_repaired_total, per
// kind found.
func (b *Backend) recordRepairs(fam runner.Family, d damage) {
	if len(d.rules) > 0 {
		b.rulesRepaired.Record(reconcile.KindIPTables, familyOfRunner(fam))
	}
	if len(d.routes) > 0 {
		b.rulesRepaired.Record(reconcile.KindPolicyRoute, familyOfRunner(fam))
	}
}
