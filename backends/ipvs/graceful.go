package ipvs

import (
	"errors"
	"net/netip"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"
)

// gracefulQueue holds real servers that left their virtual server while
// they still had connections: they stay at weight 0 (no new connections)
// until their connections are gone or their deadline passes, as
// kube-proxy's graceful termination does.
type gracefulQueue struct {
	items map[vsKey]map[netip.AddrPort]time.Time
}

func newGracefulQueue() *gracefulQueue {
	return &gracefulQueue{items: map[vsKey]map[netip.AddrPort]time.Time{}}
}

func (q *gracefulQueue) add(k vsKey, ap netip.AddrPort, deadline time.Time) {
	if q.items[k] == nil {
		q.items[k] = map[netip.AddrPort]time.Time{}
	}
	if _, ok := q.items[k][ap]; !ok {
		q.items[k][ap] = deadline
	}
}

func (q *gracefulQueue) remove(k vsKey, ap netip.AddrPort) {
	delete(q.items[k], ap)
	if len(q.items[k]) == 0 {
		delete(q.items, k)
	}
}

func (q *gracefulQueue) forgetServer(k vsKey) { delete(q.items, k) }

// len is the number of real servers waiting.
func (q *gracefulQueue) len() int {
	n := 0
	for _, m := range q.items {
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
func (b *Backend) retire(k vsKey, d *ipvs.Destination) error {
	ap, _ := destKey(d)
	if !needsGrace(k) || d.ActiveConnections+d.InactiveConnections == 0 {
		b.graceful.remove(k, ap)
		return ignoreMissing(b.k.IPVS.DelDestination(k.handle(), d))
	}
	if d.Weight != 0 {
		if err := b.k.IPVS.UpdateDestination(k.handle(), destination(ap, 0)); err != nil {
			return err
		}
	}
	b.graceful.add(k, ap, b.clock.Now().Add(b.cfg.gracefulTimeout()))
	klog.V(4).InfoS("Real server draining", "virtualServer", k, "realServer", ap,
		"active", d.ActiveConnections, "inactive", d.InactiveConnections)
	return nil
}

// reap deletes queued real servers whose connections are gone or whose
// deadline passed, and forgets those that came back (weight > 0) or
// vanished.
func (b *Backend) reap() error {
	keys := sortedKeys(keysOf(b.graceful.items))
	var errs []error
	now := b.clock.Now()
	for _, k := range keys {
		dests, err := b.k.IPVS.GetDestinations(k.handle())
		if err != nil {
			if isMissing(err) {
				b.graceful.forgetServer(k)
				continue
			}
			errs = append(errs, err)
			continue
		}
		errs = append(errs, b.reapServer(k, dests, now)...)
	}
	return errors.Join(errs...)
}

func (b *Backend) reapServer(k vsKey, dests []*ipvs.Destination, now time.Time) []error {
	byKey := map[netip.AddrPort]*ipvs.Destination{}
	for _, d := range dests {
		if ap, ok := destKey(d); ok {
			byKey[ap] = d
		}
	}
	var errs []error
	for ap, deadline := range b.graceful.items[k] {
		d, ok := byKey[ap]
		switch {
		case !ok || d.Weight != 0:
			b.graceful.remove(k, ap)
		case d.ActiveConnections+d.InactiveConnections == 0 || !now.Before(deadline):
			if err := ignoreMissing(b.k.IPVS.DelDestination(k.handle(), d)); err != nil {
				errs = append(errs, err)
				continue
			}
			b.graceful.remove(k, ap)
			klog.V(4).InfoS("Real server removed after draining", "virtualServer", k, "realServer", ap,
				"timedOut", !now.Before(deadline))
		}
	}
	return errs
}

// isMissing reports the kernel's "no such service / destination".
func isMissing(err error) bool {
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT)
}

func ignoreMissing(err error) error {
	if isMissing(err) {
		return nil
	}
	return err
}
