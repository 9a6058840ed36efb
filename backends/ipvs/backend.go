package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Backend is the IPVS proxy mode. Its methods are the mode's entry
// points (this file) and one sync's decisions (sync.go). What the kernel
// should hold is rendered, without I/O, into the model (render.go,
// rules.go, model.go); each kernel API has its applier, which writes and
// reads back that API (apply_sets.go, apply_ipvs.go, apply_addrs.go,
// apply_iptables.go); graceful.go tracks the draining real servers.
type Backend struct {
	cfg   Config
	clock clock.PassiveClock

	mu sync.Mutex // serialises Sync, Cleanup and the other entry points

	// Desired state: every service port's rendering, per family.
	model     *model
	nodeAddrs map[v1.IPFamily][]netip.Addr // NodePort addresses of the last sync

	// Kernel I/O, one applier per kernel API.
	sets     setApplier
	servers  ipvsApplier
	addrs    addressApplier
	iptables *iptablesApplier // per family: the payload written and its stamp
	graceful *gracefulTracker // real servers draining (weight 0)

	// Sync decisions: when to verify, what was repaired.
	cadence    reconcile.Cadence
	verifiedAt time.Time // last verification or full sync
	repairs    repairMetrics
	synced     bool // a full sync succeeded since New or Cleanup
	setupDone  bool // sysctls and IPVS timeouts are set
}

var _ proxier.Backend = (*Backend)(nil)

// New builds the backend. It does not touch the kernel: the first Sync
// sets everything up. It registers the switchyard_ipvs_* collector with
// cfg.Registerer, if any.
func New(cfg Config) (*Backend, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, clock: cfg.Clock}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	b.cadence = reconcile.NewCadence(cfg.VerifyInterval, b.clock)
	rules, err := reconcile.NewRepairs(cfg.Registerer, "ipvs", cfg.families())
	if err != nil {
		return nil, fmt.Errorf("ipvs backend: register metrics: %w", err)
	}
	b.repairs = repairMetrics{deprecated: newRepairCounter(), rules: rules}
	k, c := cfg.Kernel, &b.cfg
	b.graceful = newGracefulTracker(k.IPVS, b.clock, c.gracefulTimeout())
	b.sets = setApplier{h: k.IPSet, cfg: c}
	b.servers = ipvsApplier{h: k.IPVS, cfg: c, graceful: b.graceful}
	b.addrs = addressApplier{nl: k.Netlink, cfg: c}
	b.iptables = newIPTablesApplier(k.IPTables, c)
	b.reset()
	if cfg.Registerer != nil {
		for _, col := range []prometheus.Collector{newCollector(cfg.IPVS), b.repairs.deprecated} {
			if err := cfg.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("ipvs backend: register metrics: %w", err)
			}
		}
	}
	return b, nil
}

// reset forgets everything known about the kernel.
func (b *Backend) reset() {
	b.model = newModel(b.cfg.internalMarkMask())
	b.nodeAddrs = map[v1.IPFamily][]netip.Addr{}
	b.graceful.forgetAll()
	b.iptables.forget()
	b.synced = false
}

// Name is the proxy mode.
func (b *Backend) Name() string { return "ipvs" }

// Cleanup removes everything the mode installs: every IPVS virtual
// server (switchyard owns IPVS on the node, as kube-proxy does) except
// those on ExcludeCIDRs, the kube-ipvs0 interface with its addresses,
// the jumps and chains, and the sets. It carries on past errors and
// returns them all.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, f := range b.cfg.families() {
		errs = append(errs, b.iptables.cleanup(ctx, f))
	}
	errs = append(errs, b.cleanupKernelObjects(ctx))
	b.reset()
	return errors.Join(errs...)
}

// CleanupKernelObjects removes what the mode installs outside iptables:
// the virtual servers, kube-ipvs0 and the sets. A mode taking over from
// ipvs calls it once its own rules are in and the ipvs mode's chains
// (which use the sets) are gone.
func (b *Backend) CleanupKernelObjects(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cleanupKernelObjects(ctx)
}

func (b *Backend) cleanupKernelObjects(ctx context.Context) error {
	return errors.Join(b.servers.cleanup(), b.addrs.cleanup(), b.sets.cleanup(ctx))
}

// DrainKernelObjects is CleanupKernelObjects for a mode taking over from
// ipvs while connections run through IPVS: a virtual server whose real
// servers still carry connections (active or inactive) stays, and so does
// kube-ipvs0 (its addresses make those packets local, where IPVS sees
// them), until its connections end; new connections never reach it, the
// new mode translates them before routing. It returns how many virtual
// servers stay. The sets always go.
func (b *Backend) DrainKernelObjects(ctx context.Context) (kept int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	svcs, err := b.servers.all()
	if err != nil {
		return 0, err
	}
	kept, err = b.servers.drain(svcs)
	errs := []error{err}
	if kept == 0 {
		errs = append(errs, b.addrs.cleanup())
	}
	errs = append(errs, b.sets.cleanup(ctx))
	return kept, errors.Join(errs...)
}

// ServiceTraffic implements metrics.ServiceTrafficSource
// (--service-traffic-metrics) from IPVS' own per-virtual-server stats,
// read now with one netlink dump: connections are those IPVS scheduled
// (new connections), packets and bytes those from clients ("in"; replies
// are "out" and not counted, as in the other modes). Every virtual server
// of a service port counts: cluster IP, external and load-balancer IPs,
// NodePorts on each node address. Which port a virtual server belongs to
// is what the last sync wrote; a virtual server of no port (gone, or not
// ours) is skipped. moby/ipvs reads the 32-bit connection and packet
// counters, which wrap at 2^32 (Prometheus sees a reset). The kernel
// folds its per-CPU counters into these stats on its rate estimator's
// round (every 2 s), so they trail the traffic by up to 2 s.
func (b *Backend) ServiceTraffic(context.Context) ([]metrics.ServiceTrafficSample, error) {
	b.mu.Lock()
	owners := serverOwners(b.model)
	b.mu.Unlock()
	svcs, err := b.cfg.IPVS.GetServices()
	if err != nil {
		return nil, fmt.Errorf("service traffic counters: %w", err)
	}
	return trafficSamples(svcs, owners), nil
}

// EndConnectionsTo deletes at once the draining real servers at the
// addresses (--reset-vanished-endpoint-connections, called by
// conntrack.VanishedReaper once an endpoint has been out of every
// EndpointSlice for the grace period). Graceful termination would keep
// them at weight 0 until their connections end or the timeout passes,
// but a vanished endpoint's connections never end: they hang. Once the
// real server is gone, expire_nodest_conn=1 makes the kernel expire each
// of its connections at their next packet, which is scheduled afresh (a
// live endpoint answers it with a reset). It returns the number of
// connections the deleted real servers held.
func (b *Backend) EndConnectionsTo(addrs []netip.Addr) int {
	set := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		set[a.Unmap()] = true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.graceful.endConnectionsTo(set)
}
