package userspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
	pmetrics "github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Backend is the userspace proxy mode: proxy sockets, and the iptables
// rules that send service traffic to them. Its methods live in three
// files, read in this order: this one (state, lifecycle, what others
// read), sync.go (a sync, step by step, and its decisions: which family
// is rewritten, when the rules are checked) and rules.go (the iptables
// rules and policy routing: restore, check, remove). The sockets are the
// relay set's (relayset.go), the sentinels and NodePort holders their own
// types'; the rules' render (render.go) is pure.
type Backend struct {
	cfg     Config
	metrics *metrics
	// rulesRepaired is switchyard_rules_repaired_total{mode="userspace"};
	// metrics.repairs its deprecated predecessor.
	rulesRepaired *reconcile.Repairs
	cadence       reconcile.Cadence

	mu      sync.Mutex
	relays  *relaySet
	applied map[runner.Family][]byte // payload of the last successful restore
	// verifiedAt: when each family's rules were last checked (sync.go).
	verifiedAt map[runner.Family]time.Time
	skipped    skippedPorts  // SCTP service ports, logged once (skipped.go)
	holds      nodePortHolds // NodePort reservations (nodeports.go)
	sentinels  *sentinelSet
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
	b := &Backend{
		cfg:           cfg,
		metrics:       m,
		rulesRepaired: repaired,
		cadence:       reconcile.NewCadence(cfg.VerifyInterval, cfg.Clock),
		applied:       map[runner.Family][]byte{},
		verifiedAt:    map[runner.Family]time.Time{},
		holds:         nodePortHolds{open: map[holdKey]io.Closer{}},
		rendered:      map[v1.IPFamily]renderInput{},
	}
	b.relays, b.sentinels = newRelaySet(&b.cfg, m), newSentinelSet(&b.cfg)
	return b, nil
}

// Name implements proxier.Backend.
func (b *Backend) Name() string { return "userspace" }

// Cleanup implements proxier.Backend: it removes the jumps and chains of
// every configured family. Sockets stay open (see Close).
func (b *Backend) Cleanup(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.removeRulesLocked()
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
// relays. Later Syncs fail. Without the restart fallback's sentinels, and
// with a ShutdownGrace, the rules first hand the traffic to the kernel
// (handoff.go) and relayed connections get the grace to finish.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.sentinels.closeAll()
	if !b.cfg.RestartFallback && b.cfg.ShutdownGrace > 0 {
		handOff(b.cfg.Runner, b.rendered, b.relays.ports())
	}
	b.relays.drain(b.cfg.ShutdownGrace)
	b.relays.closeAll()
	b.holds.release()
	return nil
}

// ProxyPort returns the port of the proxy socket that serves a service
// port's traffic of one family. external selects the socket for external
// traffic from outside the node, which is the internal one unless the
// traffic policies differ.
func (b *Backend) ProxyPort(name proxier.ServicePortName, family v1.IPFamily, external bool) (uint16, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.relays.port(name, family, external)
}

// RelayTable returns the proxy sockets as they are now, sorted by
// service port, family and traffic kind.
func (b *Backend) RelayTable() RelayTable {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.relays.table()
}

// ServiceTraffic implements pmetrics.ServiceTrafficSource: each open proxy
// socket's counts (the collector adds up a port's internal and external
// sockets). A service port's counts go with its sockets.
func (b *Backend) ServiceTraffic(context.Context) ([]pmetrics.ServiceTrafficSample, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.relays.traffic(), nil
}

// EndConnectionsTo aborts every relayed TCP connection whose endpoint
// address is one of addrs (both sides get a reset) and returns how many.
// It is --reset-vanished-endpoint-connections for the relay: an endpoint
// that left every EndpointSlice for the grace period is gone, and a
// connection still relayed to it would hang until the client's timeouts.
// Connections to every other endpoint, draining ones included, go on.
func (b *Backend) EndConnectionsTo(addrs []netip.Addr) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.relays.endTo(addrs)
}
