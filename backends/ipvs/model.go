package ipvs

import (
	"net/netip"

	"github.com/switchyard-proxy/switchyard/internal/shrink"
)

// model is the desired kernel state: every port's rendering plus the
// aggregates the kernel sees (a virtual server, an address or a set entry
// can be wanted by several ports). Ports are replaced one at a time
// (renderPorts) and the aggregates keep track of what changed, so a
// partial sync touches only that. It holds no kernel handle: the
// appliers read it.
type model struct {
	ports   map[portKey]*portRender
	marks   *markAllocator // internal-traffic fwmarks, per port
	owners  map[vsKey]map[portKey]*virtualServer
	addrs   map[netip.Addr]int
	entries map[setEntry]int
	// setCounts is the number of distinct entries wanted per set: what
	// the periodic verification compares with the kernel's counts.
	setCounts map[string]int
	peaks     struct{ ports, owners, addrs, entries shrink.Peak }
}

func newModel(markMask uint32) *model {
	return &model{
		ports:     map[portKey]*portRender{},
		marks:     newMarkAllocator(markMask),
		owners:    map[vsKey]map[portKey]*virtualServer{},
		addrs:     map[netip.Addr]int{},
		entries:   map[setEntry]int{},
		setCounts: map[string]int{},
	}
}

// touched collects the kernel objects whose desired state may have
// changed.
type touched struct {
	servers map[vsKey]struct{}
	addrs   map[netip.Addr]struct{}
	entries map[setEntry]struct{}
}

func newTouched() *touched {
	return &touched{servers: map[vsKey]struct{}{}, addrs: map[netip.Addr]struct{}{}, entries: map[setEntry]struct{}{}}
}

func (t *touched) empty() bool {
	return len(t.servers) == 0 && len(t.addrs) == 0 && len(t.entries) == 0
}

// set replaces a port's rendering (nil removes it) and records in t what
// changed.
func (m *model) set(k portKey, r *portRender, t *touched) {
	old := m.ports[k]
	if old != nil {
		m.drop(k, old, r, t)
	}
	if r == nil {
		delete(m.ports, k)
		return
	}
	m.ports[k] = r
	for _, v := range r.servers {
		own := m.owners[v.Key]
		if own == nil {
			own = map[portKey]*virtualServer{}
			m.owners[v.Key] = own
		}
		if prev, ok := own[k]; !ok || !prev.equal(v) {
			t.servers[v.Key] = struct{}{}
		}
		own[k] = v
	}
	for _, a := range r.addrs {
		if m.addrs[a]++; m.addrs[a] == 1 {
			t.addrs[a] = struct{}{}
		}
	}
	for _, e := range r.entries {
		if m.entries[e]++; m.entries[e] == 1 {
			t.entries[e] = struct{}{}
			m.setCounts[e.Set]++
		}
	}
}

// drop removes old's contributions; servers that next keeps stay owned
// (set compares them).
func (m *model) drop(k portKey, old, next *portRender, t *touched) {
	keep := map[vsKey]bool{}
	if next != nil {
		for _, v := range next.servers {
			keep[v.Key] = true
		}
	}
	for _, v := range old.servers {
		if keep[v.Key] {
			continue
		}
		delete(m.owners[v.Key], k)
		if len(m.owners[v.Key]) == 0 {
			delete(m.owners, v.Key)
		}
		t.servers[v.Key] = struct{}{}
	}
	for _, a := range old.addrs {
		if m.addrs[a]--; m.addrs[a] <= 0 {
			delete(m.addrs, a)
			t.addrs[a] = struct{}{}
		}
	}
	for _, e := range old.entries {
		if m.entries[e]--; m.entries[e] <= 0 {
			delete(m.entries, e)
			t.entries[e] = struct{}{}
			m.setCounts[e.Set]--
		}
	}
}

// server returns the desired virtual server for a key, nil if none. When
// several ports claim the same address, port and protocol (a
// misconfiguration), the first port by name wins, deterministically.
func (m *model) server(k vsKey) *virtualServer {
	own := m.owners[k]
	if len(own) == 1 { // the usual case: no port names to compare
		for _, v := range own {
			return v
		}
	}
	var best *virtualServer
	bestKey := ""
	for pk, v := range own {
		if s := pk.String(); best == nil || s < bestKey {
			best, bestKey = v, s
		}
	}
	return best
}

// wantsAddr and wantsEntry report whether the model wants them.
func (m *model) wantsAddr(a netip.Addr) bool    { return m.addrs[a] > 0 }
func (m *model) wantsEntry(e setEntry) bool     { return m.entries[e] > 0 }
func (m *model) serverKeys() map[vsKey]struct{} { return keysOf(m.owners) }

func keysOf[K comparable, V any](m map[K]V) map[K]struct{} {
	out := make(map[K]struct{}, len(m))
	for k := range m {
		out[k] = struct{}{}
	}
	return out
}

// compact gives back the space of the maps after mass deletions.
func (m *model) compact() {
	m.ports = shrink.Map(m.ports, &m.peaks.ports)
	m.owners = shrink.Map(m.owners, &m.peaks.owners)
	m.addrs = shrink.Map(m.addrs, &m.peaks.addrs)
	m.entries = shrink.Map(m.entries, &m.peaks.entries)
}
