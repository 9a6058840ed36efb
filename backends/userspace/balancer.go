package userspace

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// balancer picks an endpoint for each new connection or UDP session of
// one proxy socket: round-robin, with optional ClientIP affinity. Safe for
// concurrent use; update swaps its state in place.
type balancer struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	endpoints []netip.AddrPort // sorted
	next      int              // index of the next round-robin pick
	last      netip.AddrPort   // the last round-robin pick
	affinity  time.Duration    // 0: no session affinity
	sticky    map[netip.Addr]stickyEntry
	swept     time.Time
}

// stickyEntry pins a client IP to an endpoint (sessionAffinity ClientIP).
type stickyEntry struct {
	endpoint netip.AddrPort
	lastUsed time.Time
}

func newBalancer(clk clock.PassiveClock) *balancer {
	return &balancer{clock: clk}
}

// update replaces the endpoint list (sorted, as SelectEndpoints returns
// it) and the affinity timeout, and returns the endpoints that went away.
// The rotation continues after the last endpoint it picked; affinity
// entries pointing at removed endpoints are dropped.
func (b *balancer) update(eps []netip.AddrPort, affinity time.Duration) (removed []netip.AddrPort) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, old := range b.endpoints {
		if !slices.Contains(eps, old) {
			removed = append(removed, old)
		}
	}
	b.endpoints = slices.Clone(eps)
	b.next = 0
	if b.last.IsValid() {
		if i := slices.IndexFunc(eps, func(e netip.AddrPort) bool { return e.Compare(b.last) > 0 }); i >= 0 {
			b.next = i
		}
	}
	b.affinity = affinity
	if affinity <= 0 {
		b.sticky = nil
		return removed
	}
	if b.sticky == nil {
		b.sticky = map[netip.Addr]stickyEntry{}
	}
	for client, e := range b.sticky {
		if slices.Contains(removed, e.endpoint) {
			delete(b.sticky, client)
		}
	}
	return removed
}

// pick returns the endpoint for a new connection from client, skipping
// endpoints for which skip returns true (already tried); ok is false when
// no endpoint is left. A client's affinity entry wins while it is fresh
// and not skipped; otherwise the round-robin pick replaces it.
func (b *balancer) pick(client netip.Addr, skip func(netip.AddrPort) bool) (ep netip.AddrPort, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if b.affinity > 0 {
		b.sweepLocked(now)
		if e, found := b.sticky[client]; found && now.Sub(e.lastUsed) < b.affinity && (skip == nil || !skip(e.endpoint)) {
			b.sticky[client] = stickyEntry{endpoint: e.endpoint, lastUsed: now}
			return e.endpoint, true
		}
	}
	for range b.endpoints {
		ep = b.endpoints[b.next]
		b.next = (b.next + 1) % len(b.endpoints)
		if skip != nil && skip(ep) {
			continue
		}
		b.last = ep
		if b.affinity > 0 {
			b.sticky[client] = stickyEntry{endpoint: ep, lastUsed: now}
		}
		return ep, true
	}
	return netip.AddrPort{}, false
}

// sweepLocked drops expired affinity entries, at most once per timeout.
func (b *balancer) sweepLocked(now time.Time) {
	if now.Sub(b.swept) < b.affinity {
		return
	}
	b.swept = now
	for client, e := range b.sticky {
		if now.Sub(e.lastUsed) >= b.affinity {
			delete(b.sticky, client)
		}
	}
}

// snapshot returns the endpoint list.
func (b *balancer) snapshot() []netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.endpoints)
}

// state returns the endpoint list and the affinity timeout.
func (b *balancer) state() ([]netip.AddrPort, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.endpoints), b.affinity
}

// has reports whether ep is one of the endpoints.
func (b *balancer) has(ep netip.AddrPort) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.endpoints, ep)
}

// size returns the number of endpoints.
func (b *balancer) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.endpoints)
}
