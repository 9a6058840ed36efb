package nftables

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// How many endpoint groups share one interval map. Both the kernel's
// set-name lookup (a list walk per rule or element message referring to a
// set) and its interval-map insertion (a walk over the map's nodes) grow
// with what they walk; 10k service ports with a map each took 50 s to
// load, one map for all took 17 s and its element changes 20-40 ms; maps
// of 16 groups load in 1.9 s and change in 1-2 ms (10k x 10, kernel 6.18).
// At 88k groups, 16 a map makes 5.5k maps for every lookup to walk: a
// first sync in-process took 9.6 s at 16, 7.4 s at 32, 6.7 s at 64, 5.5 s
// at 128, 7.2 s at 256 (44k x 1 x 2); 16 stays best at 10k x 10 (1.21 s
// against 1.40 s at 64) and 5k x 50 (1.16 s against 1.62 s at 8). So a
// full sync aims at about targetMaps maps: groupsPerMap is the power of
// two nearest groups/targetMaps, within [minGroupsPerMap, maxGroupsPerMap].
const (
	targetMaps      = 640
	minGroupsPerMap = 16
	maxGroupsPerMap = 256
)

// groupsPerMap gives the maps' width for a table of n groups.
func groupsPerMap(n int) uint32 {
	per := uint32(minGroupsPerMap)
	for per < maxGroupsPerMap && float64(n)/targetMaps >= float64(per)*1.5 {
		per *= 2
	}
	return per
}

// groupKey names an endpoint group: the endpoints one kind of traffic to
// a service port may reach, under the Cluster or the Local policy.
type groupKey struct {
	name  proxier.ServicePortName
	local bool
}

// groupIDs allocates endpoint-group identifiers for one family. An
// identifier fixes the group's map (id / groupsPerMap) and its slot
// range within it, so it stays the same while the group exists.
//
// perMap, how many groups share a map, is chosen by each full sync, which
// rewrites every map and every rule that refers to one; partial syncs keep
// it.
type groupIDs struct {
	ids    groupTable
	free   []uint32
	next   uint32
	perMap uint32
}

func newGroupIDs() *groupIDs {
	return &groupIDs{ids: newGroupTable(0), perMap: minGroupsPerMap}
}

func (g *groupIDs) lookup(k groupKey) (uint32, bool) { return g.ids.get(k) }

// ensure returns the group's identifier, allocating the lowest free one.
func (g *groupIDs) ensure(k groupKey) uint32 {
	if id, ok := g.ids.get(k); ok {
		return id
	}
	var id uint32
	if n := len(g.free); n > 0 {
		slices.Sort(g.free)
		id, g.free = g.free[0], g.free[1:]
	} else {
		id = g.next
		g.next++
	}
	g.ids.set(k, id)
	return id
}

func (g *groupIDs) release(k groupKey) {
	if id, ok := g.ids.get(k); ok {
		g.ids.del(k)
		g.free = append(g.free, id)
	}
}

// groupTable maps groups to identifiers by two independent hashes of the
// key instead of the key (a service port's name is 64 bytes of string
// headers: at 44k Services x 2 ports the map took 10.3 MB, 1.8 MB this
// way). The first hash is the map key, the second is checked on lookup;
// a key whose first hash another key holds goes to the exact map
// (practically never: ~1e-10 at 88k groups), so two groups never share
// an identifier unless 96 bits of hash collide.
type groupTable struct {
	byHash map[uint64]groupSlot
	exact  map[groupKey]uint32
}

type groupSlot struct{ id, check uint32 }

var groupSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func newGroupTable(n int) groupTable {
	return groupTable{byHash: make(map[uint64]groupSlot, n), exact: map[groupKey]uint32{}}
}

func groupHashes(k groupKey) (uint64, uint32) {
	h := func(seed maphash.Seed) uint64 {
		var m maphash.Hash
		m.SetSeed(seed)
		for _, s := range []string{k.name.Namespace, k.name.Name, k.name.Port, string(k.name.Protocol)} {
			m.WriteString(s)
			m.WriteByte(0)
		}
		if k.local {
			m.WriteByte(1)
		}
		return m.Sum64()
	}
	return h(groupSeeds[0]), uint32(h(groupSeeds[1]))
}

func (t groupTable) get(k groupKey) (uint32, bool) {
	h, c := groupHashes(k)
	if s, ok := t.byHash[h]; ok && s.check == c {
		return s.id, true
	}
	id, ok := t.exact[k]
	return id, ok
}

func (t groupTable) set(k groupKey, id uint32) {
	h, c := groupHashes(k)
	if s, ok := t.byHash[h]; ok && s.check != c {
		t.exact[k] = id
		return
	}
	t.byHash[h] = groupSlot{id: id, check: c}
}

func (t groupTable) del(k groupKey) {
	h, c := groupHashes(k)
	if s, ok := t.byHash[h]; ok && s.check == c {
		delete(t.byHash, h)
		return
	}
	delete(t.exact, k)
}

// all calls f with every identifier.
func (t groupTable) all(f func(uint32)) {
	for _, s := range t.byHash {
		f(s.id)
	}
	for _, id := range t.exact {
		f(id)
	}
}

// adoptGroups gives the groups (each lists them; n of them) the
// identifiers the live table's tags name for them, when its maps' width
// is within a factor of two of want and its identifiers are not much
// sparser than the groups (at most n/4 + width unused below the highest):
// the chains written with them then stay as they are. Groups the table
// does not name get the lowest free identifiers. Nil when nothing can be
// adopted: the groups are then numbered afresh.
func adoptGroups(each func(func(groupKey)), n int, live chainTags, want uint32) *groupIDs {
	if len(live) == 0 {
		return nil
	}
	refs := liveGroups(each, n, live)
	width, top := uint32(0), uint32(0)
	for _, g := range refs {
		switch {
		case g.Width == 0:
		case width == 0 || g.Width == width:
			width, top = g.Width, max(top, g.ID+1)
		default:
			return nil
		}
	}
	if width == 0 || width < want/2 || width > want*2 || int(top) > n+n/4+int(width) {
		return nil
	}
	ids := &groupIDs{ids: newGroupTable(n), perMap: width, next: top}
	taken := make([]bool, top)
	i := 0
	each(func(k groupKey) {
		if g := refs[i]; g.Width != 0 && !taken[g.ID] {
			ids.ids.set(k, g.ID)
			taken[g.ID] = true
		}
		i++
	})
	for id, t := range taken {
		if !t {
			ids.free = append(ids.free, uint32(id))
		}
	}
	return ids
}

// liveGroups finds, for each group in order, the group the live tags of
// its port's chains name for it (Width zero when none). A port's groups
// come one after the other, so its chains are named once.
func liveGroups(each func(func(groupKey)), n int, live chainTags) []ruleset.GroupRef {
	refs := make([]ruleset.GroupRef, 0, n)
	var port proxier.ServicePortName
	var tags [2]*ruleset.ChainTag
	each(func(k groupKey) {
		if len(refs) == 0 || k.name != port {
			chains := chainsOf(k.name)
			port, tags = k.name, [2]*ruleset.ChainTag{live.get(chains.service), live.get(chains.external)}
		}
		refs = append(refs, groupIn(tags, k.local))
	})
	return refs
}

// groupIn is the first of the tags' groups of the given kind.
func groupIn(tags [2]*ruleset.ChainTag, local bool) ruleset.GroupRef {
	for _, t := range tags {
		if t == nil {
			continue
		}
		for _, g := range t.Groups {
			if g.Local == local {
				return g
			}
		}
	}
	return ruleset.GroupRef{}
}

// groupOrders holds each endpoint group's endpoint order, indexed by the
// group's identifier (identifiers are dense: the lowest free is reused),
// so that a service port costs a slice header here instead of a map entry
// keyed by its name.
type groupOrders [][]netip.AddrPort

// get is the order last written for group id (nil when none).
func (o groupOrders) get(id uint32) []netip.AddrPort {
	if int(id) < len(o) {
		return o[id]
	}
	return nil
}

// set records group id's order, growing o as needed.
func (o *groupOrders) set(id uint32, order []netip.AddrPort) {
	if n := int(id) + 1; n > len(*o) {
		*o = slices.Grow(*o, n-len(*o))[:n]
	}
	(*o)[id] = order
}

// drop forgets group id's order (its identifier was released).
func (o groupOrders) drop(id uint32) {
	if int(id) < len(o) {
		o[id] = nil
	}
}

// groupOrder is one group's new order, from a render.
type groupOrder struct {
	id    uint32
	order []netip.AddrPort
}

// merge records a port's new orders.
func (o *groupOrders) merge(src []groupOrder) {
	for _, g := range src {
		o.set(g.id, g.order)
	}
}

// mapCount is the number of interval maps the allocated ids need.
func (g *groupIDs) mapCount() uint32 { return (g.next + g.perMap - 1) / g.perMap }

// mapOf names group id's map; offset is the first slot of its range there.
func (g *groupIDs) mapOf(id uint32) string { return endpointMap(id / g.perMap) }

func (g *groupIDs) offset(id uint32) uint32 { return (id % g.perMap) * ruleset.SlotSpace }

// endpointMap names the i-th endpoint map.
func endpointMap(i uint32) string { return fmt.Sprintf("%s%d", endpointMapPrefix, i) }

func endpointMapSet(name string) *ruleset.Set {
	return &ruleset.Set{Name: name, Kind: ruleset.DataMap, Interval: true,
		Key:  ruleset.Fields{ruleset.FieldSlot},
		Data: ruleset.Fields{ruleset.FieldDaddr, ruleset.FieldDport}}
}

// arrange orders a group's endpoints. With as many endpoints as before,
// the ones that stay keep their position (their slot range) and new ones
// take the freed positions, so replacing one endpoint rewrites one range;
// otherwise the ranges are redrawn in the selection's order.
func arrange(prev []netip.AddrPort, eps []proxier.Endpoint) []netip.AddrPort {
	cur := make([]netip.AddrPort, len(eps))
	for i, e := range eps {
		cur[i] = netip.AddrPortFrom(e.IP.Unmap(), e.Port)
	}
	if len(prev) != len(cur) {
		return cur
	}
	out := make([]netip.AddrPort, len(prev))
	placed := make(map[netip.AddrPort]bool, len(cur))
	for _, ap := range cur {
		placed[ap] = false
	}
	for i, ap := range prev {
		if _, ok := placed[ap]; ok {
			out[i], placed[ap] = ap, true
		}
	}
	next := 0
	for _, ap := range cur {
		if placed[ap] {
			continue
		}
		for out[next].IsValid() {
			next++
		}
		out[next] = ap
	}
	return out
}

// groupElements splits the group's SlotSpace slots into one range per
// endpoint, each ceil or floor of SlotSpace/n slots: with n endpoints an
// endpoint's share is within n/SlotSpace of 1/n (0.02 % relative at n=10).
func groupElements(offset uint32, order []netip.AddrPort) []ruleset.Element {
	n := uint64(len(order))
	off := uint64(offset)
	out := make([]ruleset.Element, 0, n)
	for k, ap := range order {
		lo := off + uint64(k)*ruleset.SlotSpace/n
		hi := off + uint64(k+1)*ruleset.SlotSpace/n - 1
		out = append(out, ruleset.Element{
			Key:    []ruleset.Value{{Num: uint32(lo)}},
			KeyEnd: []ruleset.Value{{Num: uint32(hi)}},
			Data:   []ruleset.Value{{Addr: ap.Addr()}, {Num: uint32(ap.Port())}},
		})
	}
	return out
}
