package userspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/internal/shrink"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Backend is the userspace proxy mode: proxy sockets, and the iptables
// rules that send service traffic to them.
type Backend struct {
	cfg     Config
	metrics *metrics
	// rulesRepaired is switchyard_rules_repaired_total{mode="userspace"};
	// metrics.repairs its deprecated predecessor.
	rulesRepaired *reconcile.Repairs
	cadence       reconcile.Cadence

	mu       sync.Mutex
	sockets  map[socketKey]proxySocket
	peak     shrink.Peak              // of sockets, to give back its space after mass deletions
	draining []proxySocket            // removed TCP sockets with live connections
	applied  map[runner.Family][]byte // payload of the last successful restore
	// verifiedAt: when each family's rules were last checked (verify.go).
	verifiedAt map[runner.Family]time.Time
	flush      map[flushKey]struct{} // UDP proxy ports whose conntrack entries must go
	skipped    skippedPorts          // SCTP service ports, logged once (skipped.go)
	holds      nodePortHolds         // NodePort reservations (nodeports.go)
	sentinels  map[sentinelKey]sentinel
	// rendered: each family's last render inputs, for the handoff rules
	// Close writes (handoff.go).
	rendered map[v1.IPFamily]renderInput
	closed   bool
}

var _ proxier.Backend = (*Backend)(nil)

// New returns a backend. Nothing is opened or written before the first
// Sync.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	for _, fam := range cfg.Families {
		m.repairs.WithLabelValues(string(runnerFamily(fam)))
	}
	repaired, err := reconcile.NewRepairs(cfg.Registerer, "userspace", cfg.Families)
	if err != nil {
		return nil, err
	}
	return &Backend{
		cfg:           cfg,
		metrics:       m,
		rulesRepaired: repaired,
		cadence:       reconcile.NewCadence(cfg.VerifyInterval, cfg.Clock),
		sockets:       map[socketKey]proxySocket{},
		applied:       map[runner.Family][]byte{},
		verifiedAt:    map[runner.Family]time.Time{},
		flush:         map[flushKey]struct{}{},
		holds:         nodePortHolds{open: map[holdKey]io.Closer{}},
		sentinels:     map[sentinelKey]sentinel{},
		rendered:      map[v1.IPFamily]renderInput{},
	}, nil
}

// Name implements proxier.Backend.
func (b *Backend) Name() string { return "userspace" }

// Sync implements proxier.Backend: it opens the proxy sockets new service
// ports need, swaps every socket's endpoints, rewrites the rules of each
// family (one restore, skipped when unchanged unless the sync is full or
// a check finds them damaged: see verify.go), and only then closes the
// sockets of service ports that are gone, and deletes the conntrack
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
	b.noteSkippedLocked(st)
	plans := map[v1.IPFamily][]servicePlan{}
	specs := map[socketKey]socketSpec{}
	sentinels := map[sentinelKey]string{}
	npAddrs, err := b.nodePortAddrs()
	if err != nil {
		// NodePorts then have no sentinel (their traffic takes the kernel
		// fallback) and keep their reservations until the next sync.
		klog.ErrorS(err, "Cannot list local addresses for --nodeport-addresses; NodePort sentinels and reservations left for the next sync")
		npAddrs = nil
	}
	for _, fam := range b.cfg.Families {
		plans[fam] = planFamily(st, fam, b.cfg.LocalDetector.Match(fam, st.Node).ByInterface())
		addSpecs(specs, plans[fam], b.insideOf(fam, st))
		if b.cfg.RestartFallback {
			sentinelKeys(sentinels, plans[fam], npAddrs[fam])
		}
	}
	if err := b.openLocked(specs); err != nil {
		return proxier.SyncResult{}, err
	}
	ports := b.portsLocked()
	b.openEarlySentinelsLocked(sentinels)
	res := proxier.SyncResult{Full: diff.Full}
	for _, fam := range b.cfg.Families {
		rc := renderConfig{family: fam, listenIP: b.cfg.listenIP(fam),
			hostIP: b.cfg.hostIP(fam, st.Node.Addresses), local: b.cfg.LocalDetector.Match(fam, st.Node),
			nodePods:         nodePodCIDR(fam, st.Node.PodCIDRs),
			nodePortPrefixes: proxier.PrefixesOfFamily(b.cfg.NodePortAddresses, fam),
			mark:             b.cfg.mark(), masqMark: b.cfg.masqMark(), fallback: b.cfg.RestartFallback}
		full, err := b.syncFamilyLocked(ctx, runnerFamily(fam), render(rc, plans[fam], ports), diff)
		if err != nil {
			return proxier.SyncResult{}, err
		}
		b.rendered[fam] = renderInput{rc: rc, plans: plans[fam]}
		res.Full = res.Full || full
	}
	// A NodePort's sentinel holds its port: release the holder first,
	// reserve the NodePorts without one after.
	b.dropHoldsLocked(func(k holdKey) bool {
		return sentinelHolds(k, func(sk sentinelKey) bool { _, ok := sentinels[sk]; return ok })
	})
	b.syncSentinelsLocked(sentinels)
	b.reserveLocked(plans, npAddrs)
	b.retireLocked(specs)
	b.sockets = shrink.Map(b.sockets, &b.peak)
	// The rules in force no longer lead to the flushed ports; a failed
	// flush is retried by the next sync.
	return res, b.flushLocked()
}

// openEarlySentinelsLocked opens the UDP sentinels that may precede the
// rules (earlySentinels), releasing their NodePorts' holders first.
func (b *Backend) openEarlySentinelsLocked(want map[sentinelKey]string) {
	early := b.earlySentinels(want)
	if len(early) == 0 {
		return
	}
	b.dropHoldsLocked(func(k holdKey) bool {
		return sentinelHolds(k, func(sk sentinelKey) bool { _, ok := early[sk]; return ok })
	})
	b.openSentinelsLocked(early)
}

// syncFamilyLocked applies one family's payload, fully when diff asks for
// it or when a due check finds the rules damaged; it reports whether the
// sync was full. A repair is logged, with what it found, once applied.
func (b *Backend) syncFamilyLocked(ctx context.Context, fam runner.Family, payload []byte, diff *proxier.Diff) (bool, error) {
	var d damage
	if !diff.Full && b.verifyDueLocked(diff, fam) {
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

// openLocked opens the missing sockets and gives every socket its
// endpoints. Sockets that fail to open are reported; the others are kept.
func (b *Backend) openLocked(specs map[socketKey]socketSpec) error {
	var errs []error
	for key, spec := range specs {
		s, ok := b.sockets[key]
		if !ok {
			var err error
			if s, err = b.open(key, spec); err != nil {
				errs = append(errs, err)
				continue
			}
			b.sockets[key] = s
		}
		if spec.protocol == v1.ProtocolUDP && len(spec.endpoints) == 0 && s.balancer().size() > 0 {
			b.flush[flushKey{family: key.family, port: s.port()}] = struct{}{}
		}
		s.update(spec.endpoints, spec.affinity)
		s.setTransparency(spec.transparency)
	}
	return errors.Join(errs...)
}

func (b *Backend) open(key socketKey, spec socketSpec) (proxySocket, error) {
	label, proto := key.name.String(), spec.protocol
	base := proxyBase{label: label, bal: newBalancer(b.cfg.Clock), sockets: b.cfg.Sockets, tr: &trState{},
		traffic: &trafficCount{port: spec.port}}
	addr := netip.AddrPortFrom(b.cfg.listenIP(key.family), 0)
	var s proxySocket
	var err error
	if proto == v1.ProtocolUDP {
		base.pm = b.metrics.acquireUDP(label)
		s, err = newUDPProxy(base, addr, b.cfg.Clock, udpLimits{idle: b.cfg.UDPIdleTimeout, maxSessions: b.cfg.UDPMaxSessions})
	} else {
		base.pm = b.metrics.acquire(label)
		s, err = newTCPProxy(base, addr, b.cfg.DialTimeout)
	}
	if err != nil {
		b.metrics.release(label)
		return nil, fmt.Errorf("userspace: open %s proxy socket for %s (%s): %w", proto, key.name, key.family, err)
	}
	klog.V(4).InfoS("Opened proxy socket", "servicePort", key.name, "family", key.family,
		"traffic", key.kind, "protocol", proto, "port", s.port())
	return s, nil
}

func (b *Backend) portsLocked() map[socketKey]uint16 {
	ports := make(map[socketKey]uint16, len(b.sockets))
	for key, s := range b.sockets {
		ports[key] = s.port()
	}
	return ports
}

// applyLocked restores one family's rules and, on full syncs, makes sure
// the jumps into them exist.
func (b *Backend) applyLocked(ctx context.Context, fam runner.Family, payload []byte, full bool) error {
	last, known := b.applied[fam]
	if !full && known && bytes.Equal(last, payload) {
		return nil
	}
	if err := b.cfg.Runner.Restore(ctx, fam, payload); err != nil {
		delete(b.applied, fam)
		klog.ErrorS(err, "Restoring userspace proxy rules failed", "family", fam,
			"lines", runner.OffendingLines(payload, err))
		return fmt.Errorf("userspace: restore %s rules: %w", fam, err)
	}
	if full || !known {
		if err := ensureJumps(b.cfg.Runner, fam); err != nil {
			delete(b.applied, fam)
			return err
		}
		if err := b.ensureRouting(fam); err != nil {
			delete(b.applied, fam)
			return err
		}
	}
	b.applied[fam] = payload
	return nil
}

// retireLocked closes the sockets no service port needs any more; TCP
// ones with live connections drain.
func (b *Backend) retireLocked(specs map[socketKey]socketSpec) {
	for key, s := range b.sockets {
		if _, ok := specs[key]; ok {
			continue
		}
		delete(b.sockets, key)
		if key.name.Protocol == v1.ProtocolUDP {
			b.flush[flushKey{family: key.family, port: s.port()}] = struct{}{}
		}
		s.close(true)
		b.metrics.release(key.name.String())
		klog.V(4).InfoS("Closed proxy socket", "servicePort", key.name, "family", key.family,
			"traffic", key.kind, "port", s.port(), "draining", s.active())
		b.draining = append(b.draining, s)
	}
	b.draining = slices.DeleteFunc(b.draining, func(s proxySocket) bool { return s.active() == 0 })
}

// Cleanup implements proxier.Backend: it removes the jumps and chains of
// every configured family. Sockets stay open (see Close).
func (b *Backend) Cleanup(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, fam := range b.cfg.Families {
		errs = append(errs, removeRules(b.cfg.Runner, runnerFamily(fam)))
		if b.cfg.Routing != nil {
			if err := b.cfg.Routing.RemovePolicyRoute(fam, b.cfg.policyRoute()); err != nil {
				errs = append(errs, fmt.Errorf("userspace: remove %s policy routing: %w", fam, err))
			}
		}
	}
	clear(b.applied)
	return errors.Join(errs...)
}

// RemovePolicyRoutes deletes the transparent proxy's policy routing of
// every configured family and nothing else: a mode taking over from
// userspace calls it after the portal chains are swept.
func (b *Backend) RemovePolicyRoutes() error {
	if b.cfg.Routing == nil {
		return nil
	}
	var errs []error
	for _, fam := range b.cfg.Families {
		if err := b.cfg.Routing.RemovePolicyRoute(fam, b.cfg.policyRoute()); err != nil {
			errs = append(errs, fmt.Errorf("userspace: remove %s policy routing: %w", fam, err))
		}
	}
	return errors.Join(errs...)
}

// Close closes every proxy socket and every connection and session it
// relays. Later Syncs fail.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.closeSentinelsLocked()
	b.handOffLocked()
	b.drainLocked()
	for key, s := range b.sockets {
		s.close(false)
		b.metrics.release(key.name.String())
	}
	for _, s := range b.draining {
		s.close(false)
	}
	clear(b.sockets)
	b.draining = nil
	b.releaseHoldsLocked()
	return nil
}

// ensureRouting adds the policy routing of fam, if the backend writes
// any.
func (b *Backend) ensureRouting(fam runner.Family) error {
	if b.cfg.Routing == nil {
		return nil
	}
	if err := b.cfg.Routing.EnsurePolicyRoute(familyOfRunner(fam), b.cfg.policyRoute()); err != nil {
		return fmt.Errorf("userspace: %s policy routing: %w", fam, err)
	}
	return nil
}

// drainLocked, with the sentinels closed (new connections now go to the
// kernel fallback), gives connections already on their way to a proxy
// socket a moment to be accepted, stops accepting and lets the TCP
// connections being relayed finish, for up to Config.ShutdownGrace.
func (b *Backend) drainLocked() {
	grace := b.cfg.ShutdownGrace
	if grace <= 0 {
		return
	}
	time.Sleep(min(grace, handoffDelay))
	for _, s := range b.sockets {
		if _, ok := s.(*tcpProxy); ok {
			s.close(true)
		}
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		live := 0
		for _, s := range b.sockets {
			live += s.active()
		}
		for _, s := range b.draining {
			live += s.active()
		}
		if live == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// handoffDelay covers a SYN marked just before its sentinel closed, on
// its way to the proxy socket's accept queue.
const handoffDelay = 50 * time.Millisecond

// ProxyPort returns the port of the proxy socket that serves a service
// port's traffic of one family. external selects the socket for external
// traffic from outside the node, which is the internal one unless the
// traffic policies differ.
func (b *Backend) ProxyPort(name proxier.ServicePortName, family v1.IPFamily, external bool) (uint16, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := socketKey{name: name, family: family, kind: internalTraffic}
	if ext := (socketKey{name: name, family: family, kind: externalTraffic}); external && b.sockets[ext] != nil {
		key = ext
	}
	s, ok := b.sockets[key]
	if !ok {
		return 0, false
	}
	return s.port(), true
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
