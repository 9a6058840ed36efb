package conntrack

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// DefaultVanishedGrace is how long an endpoint must stay out of every
// EndpointSlice before its TCP flows are ended: long enough for a slice
// rewritten in two steps, or a pod re-added at once, not to cost its
// connections.
const DefaultVanishedGrace = 10 * time.Second

// VanishedConfig configures a VanishedReaper.
type VanishedConfig struct {
	// Families are the IP families whose tables are cleaned. Empty means
	// IPv4 only.
	Families []v1.IPFamily
	// Grace is how long an endpoint must be gone; 0 means
	// DefaultVanishedGrace.
	Grace time.Duration
	// NodeIPs are addresses NodePorts answer on besides the node's own,
	// as in Config.
	NodeIPs []netip.Addr
	// Clock times the grace period; nil means the real clock.
	Clock clock.WithDelayedExecution
	// Relays are backends whose own connections to vanished endpoints
	// end too (ConnectionEnder).
	Relays []ConnectionEnder
	// Registerer receives switchyard_vanished_endpoint_connections_ended_total;
	// nil registers it nowhere (it is still counted).
	Registerer prometheus.Registerer
}

// ConnectionEnder is a backend that can end its connections to given
// endpoint addresses (userspace.Backend and userspace.LocalhostNodePorts
// abort relayed connections; ipvs.Backend deletes draining real servers).
type ConnectionEnder interface {
	EndConnectionsTo(addrs []netip.Addr) int
}

// VanishedReaper ends TCP flows to endpoints that vanished (an opt-in,
// --reset-vanished-endpoint-connections). When a pod's node dies or its
// network namespace goes away, the connections NATed to it hang until
// the client's own timeouts, minutes later: conntrack keeps sending the
// client's packets to the dead address. Once an endpoint address has
// been out of every service's EndpointSlices for the grace period, the
// reaper deletes the conntrack entries of TCP flows that were NATed from
// a service address to it. The client's next packet then finds no entry,
// is NATed afresh (to a live endpoint, which answers with a reset, or to
// the no-endpoints REJECT, which resets it), and the client sees
// ECONNRESET at once.
//
// An endpoint still listed in any slice of any service, in any state
// (ready, serving, terminating, or none of these), is never touched: a
// terminating pod keeps its connections through its graceful shutdown.
// Flows that were not NATed from a service address (pod-to-pod, hostPort)
// are never touched either. It implements proxier.PostSyncHook.
type VanishedReaper struct {
	table   Table
	cfg     VanishedConfig
	deleted *prometheus.CounterVec

	mu       sync.Mutex
	services map[proxier.ServicePortName][]netip.Addr // endpoint addresses per service port
	refs     map[netip.Addr]int                       // how many service ports list each address
	pending  map[netip.Addr]*vanished
	timer    clock.Timer // set while a reap is scheduled
	closed   bool
	onReap   func() // tests: called when a reap ends
}

// vanished is an endpoint address out of every slice, waiting for its
// grace period.
type vanished struct {
	since time.Time
	// via are the TCP service addresses its flows may have been NATed
	// from, as of when it vanished.
	via keySet
}

var _ proxier.PostSyncHook = (*VanishedReaper)(nil)

// NewVanishedReaper returns a reaper that cleans table (nil: no
// conntrack NAT to clean, relays only).
func NewVanishedReaper(table Table, cfg VanishedConfig) (*VanishedReaper, error) {
	if len(cfg.Families) == 0 {
		cfg.Families = []v1.IPFamily{v1.IPv4Protocol}
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultVanishedGrace
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	r := &VanishedReaper{table: table, cfg: cfg,
		services: map[proxier.ServicePortName][]netip.Addr{}, refs: map[netip.Addr]int{}, pending: map[netip.Addr]*vanished{},
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Name: "vanished_endpoint_connections_ended_total",
			Help: "TCP connections to endpoints that left every EndpointSlice, ended after the grace period so that clients get a reset (conntrack entries deleted, relayed connections aborted), per IP family.",
		}, []string{"ip_family"}),
	}
	for _, f := range cfg.Families {
		r.deleted.WithLabelValues(string(f))
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(r.deleted); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// PostSync implements proxier.PostSyncHook: it updates which endpoint
// addresses the services list and schedules the reap of those that left.
func (r *VanishedReaper) PostSync(_ context.Context, st *proxier.State, diff *proxier.Diff) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	var gone []netip.Addr
	for _, name := range r.touched(st, diff) {
		gone = append(gone, r.update(name, endpointAddrs(st.Endpoints[name]))...)
	}
	if len(gone) > 0 {
		via := tcpServiceKeys(st, diff, r.cfg.Families, r.nodeIPs(st))
		now := r.cfg.Clock.Now()
		for _, a := range gone {
			r.pending[a] = &vanished{since: now, via: via}
		}
		klog.V(2).InfoS("Endpoints left every EndpointSlice; their TCP flows end after the grace period unless they return",
			"endpoints", gone, "grace", r.cfg.Grace)
	}
	r.scheduleLocked()
}

// touched are the service ports whose endpoints may have changed: all of
// them, and the ones it knew, on a full sync.
func (r *VanishedReaper) touched(st *proxier.State, diff *proxier.Diff) []proxier.ServicePortName {
	if diff != nil && !diff.Full {
		out := make([]proxier.ServicePortName, 0, len(diff.Changed))
		for name := range diff.Changed {
			out = append(out, name)
		}
		return out
	}
	out := make([]proxier.ServicePortName, 0, len(st.Endpoints)+len(r.services))
	for name := range st.Endpoints {
		out = append(out, name)
	}
	for name := range r.services {
		if _, ok := st.Endpoints[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// update replaces one service port's endpoint addresses and returns the
// addresses no service lists any more. Addresses that came back leave
// the pending set.
func (r *VanishedReaper) update(name proxier.ServicePortName, now []netip.Addr) (gone []netip.Addr) {
	before := r.services[name]
	if len(now) == 0 {
		delete(r.services, name)
	} else {
		r.services[name] = now
	}
	for _, a := range now {
		if !slices.Contains(before, a) {
			r.refs[a]++
			delete(r.pending, a)
		}
	}
	for _, a := range before {
		if slices.Contains(now, a) {
			continue
		}
		if r.refs[a]--; r.refs[a] <= 0 {
			delete(r.refs, a)
			gone = append(gone, a)
		}
	}
	return gone
}

// endpointAddrs are the distinct addresses of a service port's endpoints,
// whatever their state.
func endpointAddrs(eps []proxier.Endpoint) []netip.Addr {
	out := make([]netip.Addr, 0, len(eps))
	for i := range eps {
		a := eps[i].IP.Unmap()
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// tcpServiceKeys are the TCP service addresses of st and of the ports
// the diff deleted, every family.
func tcpServiceKeys(st *proxier.State, diff *proxier.Diff, families []v1.IPFamily, nodeIPs []netip.Addr) keySet {
	keys := keySet{}
	add := func(sp *proxier.ServicePort) {
		if sp.Protocol != v1.ProtocolTCP {
			return
		}
		for _, fam := range families {
			forEachAddress(sp, protoTCP, fam, nodeIPs, func(k flowKey) { keys[k] = struct{}{} })
		}
	}
	for _, sp := range st.Services {
		add(sp)
	}
	if diff != nil {
		for _, sp := range diff.Deleted {
			if sp != nil {
				add(sp)
			}
		}
	}
	return keys
}

func (r *VanishedReaper) nodeIPs(st *proxier.State) []netip.Addr {
	return append(slices.Clone(st.Node.Addresses), r.cfg.NodeIPs...)
}

// scheduleLocked arms the timer for the earliest pending endpoint.
func (r *VanishedReaper) scheduleLocked() {
	if r.timer != nil || len(r.pending) == 0 {
		return
	}
	first := time.Time{}
	for _, v := range r.pending {
		if first.IsZero() || v.since.Before(first) {
			first = v.since
		}
	}
	wait := max(first.Add(r.cfg.Grace).Sub(r.cfg.Clock.Now()), 0)
	// On its own goroutine: a fake clock runs the callback under its lock.
	r.timer = r.cfg.Clock.AfterFunc(wait, func() { go r.reap() })
}

// reap deletes the flows of the endpoints whose grace period is over,
// then schedules the next. A failed delete is logged; the endpoint is not
// retried (its flows are hanging already, and the next vanish of another
// endpoint scans the table again).
func (r *VanishedReaper) reap() {
	if r.onReap != nil {
		defer r.onReap()
	}
	r.mu.Lock()
	r.timer = nil
	if r.closed {
		r.mu.Unlock()
		return
	}
	due := r.dueLocked()
	r.scheduleLocked()
	r.mu.Unlock()
	if len(due) == 0 {
		return
	}
	var errs []error
	for _, fam := range r.cfg.Families {
		n, err := r.end(fam, due)
		r.deleted.WithLabelValues(string(fam)).Add(float64(n))
		if n > 0 {
			klog.InfoS("Ended TCP connections to vanished endpoints", "ipFamily", fam, "connections", n, "endpoints", len(due))
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		klog.ErrorS(err, "Deleting the conntrack entries of vanished endpoints failed")
	}
}

// end ends one family's connections to the due endpoints: conntrack
// entries, then relayed connections.
func (r *VanishedReaper) end(fam v1.IPFamily, due map[netip.Addr]keySet) (int, error) {
	var addrs []netip.Addr
	for a := range due {
		if proxier.FamilyOf(a) == fam {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if r.table != nil {
		n, err = r.table.Delete(fam, vanishedFilter{due: due})
	}
	for _, relay := range r.cfg.Relays {
		n += relay.EndConnectionsTo(addrs)
	}
	return n, err
}

// dueLocked takes the pending endpoints whose grace period is over.
func (r *VanishedReaper) dueLocked() map[netip.Addr]keySet {
	now := r.cfg.Clock.Now()
	due := map[netip.Addr]keySet{}
	for a, v := range r.pending {
		if !now.Before(v.since.Add(r.cfg.Grace)) {
			due[a] = v.via
			delete(r.pending, a)
		}
	}
	return due
}

// Close stops the timer; no reap runs after it.
func (r *VanishedReaper) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// vanishedFilter matches TCP flows NATed from a service address to a due
// endpoint address.
type vanishedFilter struct {
	due map[netip.Addr]keySet
}

var _ netlink.CustomConntrackFilter = vanishedFilter{}

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (f vanishedFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	t := tupleOf(flow)
	if t.proto != protoTCP {
		return false
	}
	via, ok := f.due[t.replySrc.Addr()]
	if !ok || t.replySrc == t.origDst {
		return false
	}
	_, ok = via[newFlowKey(protoTCP, t.origDst.Addr(), t.origDst.Port())]
	return ok
}
