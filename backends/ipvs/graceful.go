package ipvs

import (
	"errors"
	"net/netip"
	"time"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// gracefulTracker holds real servers that left their virtual server
// while they still had connections: they stay at weight 0 (no new
// connections) until their connections are gone or their deadline
// passes, as kube-proxy's graceful termination does. It deletes them
// (over Kernel.IPVS) once that is so.
type gracefulTracker struct {
	h       IPVS
	clock   clock.PassiveClock
	timeout time.Duration
	items   map[vsKey]map[netip.AddrPort]time.Time // deadlines
}

func newGracefulTracker(h IPVS, clk clock.PassiveClock, timeout time.Duration) *gracefulTracker {
	return &gracefulTracker{h: h, clock: clk, timeout: timeout, items: map[vsKey]map[netip.AddrPort]time.Time{}}
}

func (g *gracefulTracker) add(k vsKey, ap netip.AddrPort, deadline time.Time) {
	if g.items[k] == nil {
		g.items[k] = map[netip.AddrPort]time.Time{}
	}
	if _, ok := g.items[k][ap]; !ok {
		g.items[k][ap] = deadline
	}
}

func (g *gracefulTracker) remove(k vsKey, ap netip.AddrPort) {
	delete(g.items[k], ap)
	if len(g.items[k]) == 0 {
		delete(g.items, k)
	}
}

func (g *gracefulTracker) forgetServer(k vsKey) { delete(g.items, k) }

// forgetAll drops every queued real server (Backend.reset; a restarted
// backend finds weight-0 servers on its first full sync).
func (g *gracefulTracker) forgetAll() { g.items = map[vsKey]map[netip.AddrPort]time.Time{} }

// len is the number of real servers waiting.
func (g *gracefulTracker) len() int {
	n := 0
	for _, m := range g.items {
		n += len(m)
	}
	return n
}

// needsGrace reports whether real servers of the key are drained rather
// than deleted at once. UDP and SCTP are deleted at once, like
// kube-proxy: with expire_nodest_conn=1 their flows move on at the next
// packet.
func needsGrace(k vsKey) bool {
	return k.Mark != 0 || k.Proto == v1.ProtocolTCP
}

// retire takes a real server out of a virtual server: deleted when it has
// no connections (or is not TCP), else set to weight 0 and queued.
func (g *gracefulTracker) retire(k vsKey, d *ipvs.Destination) error {
	ap, _ := destKey(d)
	if !needsGrace(k) || d.ActiveConnections+d.InactiveConnections == 0 {
		g.remove(k, ap)
		return ignoreMissing(g.h.DelDestination(k.handle(), d))
	}
	if d.Weight != 0 {
		if err := g.h.UpdateDestination(k.handle(), destination(ap, 0)); err != nil {
			return err
		}
	}
	g.add(k, ap, g.clock.Now().Add(g.timeout))
	klog.V(4).InfoS("Real server draining", "virtualServer", k, "realServer", ap,
		"active", d.ActiveConnections, "inactive", d.InactiveConnections)
	return nil
}

// reap deletes queued real servers whose connections are gone or whose
// deadline passed, and forgets those that came back (weight > 0) or
// vanished.
func (g *gracefulTracker) reap() error {
	var errs []error
	now := g.clock.Now()
	for _, k := range sortedKeys(keysOf(g.items)) {
		dests, err := g.h.GetDestinations(k.handle())
		if err != nil {
			if isMissing(err) {
				g.forgetServer(k)
				continue
			}
			errs = append(errs, err)
			continue
		}
		errs = append(errs, g.reapServer(k, dests, now)...)
	}
	return errors.Join(errs...)
}

func (g *gracefulTracker) reapServer(k vsKey, dests []*ipvs.Destination, now time.Time) []error {
	byKey := map[netip.AddrPort]*ipvs.Destination{}
	for _, d := range dests {
		if ap, ok := destKey(d); ok {
			byKey[ap] = d
		}
	}
	var errs []error
	for ap, deadline := range g.items[k] {
		d, ok := byKey[ap]
		switch {
		case !ok || d.Weight != 0:
			g.remove(k, ap)
		case d.ActiveConnections+d.InactiveConnections == 0 || !now.Before(deadline):
			if err := ignoreMissing(g.h.DelDestination(k.handle(), d)); err != nil {
				errs = append(errs, err)
				continue
			}
			g.remove(k, ap)
			klog.V(4).InfoS("Real server removed after draining", "virtualServer", k, "realServer", ap,
				"timedOut", !now.Before(deadline))
		}
	}
	return errs
}

// endConnectionsTo deletes at once the queued real servers whose address
// is in set (Backend.EndConnectionsTo) and returns the number of
// connections they held.
func (g *gracefulTracker) endConnectionsTo(set map[netip.Addr]bool) int {
	n := 0
	for _, k := range sortedKeys(keysOf(g.items)) {
		n += g.endDraining(k, set)
	}
	return n
}

// endDraining deletes the queued real servers of one virtual server whose
// address is in set.
func (g *gracefulTracker) endDraining(k vsKey, set map[netip.Addr]bool) int {
	dests, err := g.h.GetDestinations(k.handle())
	if err != nil {
		if !isMissing(err) {
			klog.ErrorS(err, "Listing real servers to end vanished endpoints' connections failed", "virtualServer", k)
		}
		return 0
	}
	n := 0
	for _, d := range dests {
		ap, ok := destKey(d)
		if _, queued := g.items[k][ap]; !ok || !queued || !set[ap.Addr()] || d.Weight != 0 {
			continue
		}
		if err := ignoreMissing(g.h.DelDestination(k.handle(), d)); err != nil {
			klog.ErrorS(err, "Deleting a vanished endpoint's real server failed", "virtualServer", k, "realServer", ap)
			continue
		}
		g.remove(k, ap)
		n += d.ActiveConnections + d.InactiveConnections
	}
	return n
}
