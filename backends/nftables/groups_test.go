package nftables

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

func endpoints(ips ...string) []proxier.Endpoint {
	out := make([]proxier.Endpoint, len(ips))
	for i, ip := range ips {
		out[i] = proxier.Endpoint{IP: netip.MustParseAddr(ip), Port: 80}
	}
	return out
}

// TestGroupElementsShares: the ranges of a group cover its 65,536 slots
// exactly once, in order, and each of n endpoints gets floor or ceil of
// 65536/n slots, so its share of uniformly drawn slots is within n/65536
// of 1/n.
func TestGroupElementsShares(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 10, 100, 1000} {
		order := make([]netip.AddrPort, n)
		for i := range order {
			order[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 80)
		}
		off := uint32(5 * ruleset.SlotSpace)
		next := off
		for i, e := range groupElements(off, order) {
			lo, hi := e.Key[0].Num, e.KeyEnd[0].Num
			if lo != next {
				t.Fatalf("n=%d: range %d starts at %d, want %d", n, i, lo, next)
			}
			size := hi - lo + 1
			if size != ruleset.SlotSpace/uint32(n) && size != ruleset.SlotSpace/uint32(n)+1 {
				t.Errorf("n=%d: range %d has %d slots", n, i, size)
			}
			next = hi + 1
		}
		if next != off+ruleset.SlotSpace {
			t.Errorf("n=%d: ranges end at %d, want %d", n, next, off+ruleset.SlotSpace)
		}
	}
}

// TestArrangeKeepsPositions: replacing one endpoint keeps every other in
// its range; a different count redraws in the selection's order.
func TestArrangeKeepsPositions(t *testing.T) {
	prev := arrange(nil, endpoints("10.0.0.1", "10.0.0.2", "10.0.0.3"))
	got := arrange(prev, endpoints("10.0.0.1", "10.0.0.3", "10.0.0.9"))
	want := []string{"10.0.0.1:80", "10.0.0.9:80", "10.0.0.3:80"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("replacement: got %v, want %v", got, want)
	}
	if got := arrange(prev, endpoints("10.0.0.3", "10.0.0.4")); fmt.Sprint(got) != "[10.0.0.3:80 10.0.0.4:80]" {
		t.Errorf("new count: got %v", got)
	}
}

// TestGroupIDsReuse: freed identifiers are reused lowest first, so the
// maps stay as few as the groups need.
func TestGroupIDsReuse(t *testing.T) {
	g := newGroupIDs()
	keys := make([]groupKey, 40)
	for i := range keys {
		keys[i] = groupKey{name: proxier.ServicePortName{Port: fmt.Sprint(i)}}
		if id := g.ensure(keys[i]); id != uint32(i) {
			t.Fatalf("id %d for key %d", id, i)
		}
	}
	g.release(keys[30])
	g.release(keys[3])
	if id := g.ensure(groupKey{local: true}); id != 3 {
		t.Errorf("reused id %d, want 3", id)
	}
	if g.mapCount() != 3 {
		t.Errorf("%d maps for 40 ids, want 3", g.mapCount())
	}
}

// TestSortedNamesOrder: "namespace/name" first, then "port/protocol",
// compared as the joined strings (so "a/x" sorts after "a-b/x").
func TestSortedNamesOrder(t *testing.T) {
	n := func(ns, name, port string, proto v1.Protocol) proxier.ServicePortName {
		return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: proto}
	}
	want := []proxier.ServicePortName{
		n("a-b", "x", "", v1.ProtocolTCP),
		n("a", "x", "", v1.ProtocolTCP),
		n("a", "x", "", v1.ProtocolUDP),
		n("a", "x", "dns", v1.ProtocolTCP),
		n("a", "x-y", "", v1.ProtocolTCP),
		n("a", "xy", "a", v1.ProtocolSCTP),
		n("b", "", "", v1.ProtocolTCP),
	}
	m := map[proxier.ServicePortName]bool{}
	for _, w := range want {
		m[w] = true
	}
	if got := sortedNames(m); !slices.Equal(got, want) {
		t.Errorf("order:\n%v\nwant\n%v", got, want)
	}
}

// TestGroupsPerMapAimsAtTargetMaps: 16 groups a map up to ~15k groups,
// then the power of two nearest groups/640, at most 256.
func TestGroupsPerMapAimsAtTargetMaps(t *testing.T) {
	for n, want := range map[int]uint32{0: 16, 10000: 16, 15000: 16, 20000: 32, 88000: 128, 200000: 256, 1000000: 256} {
		if got := groupsPerMap(n); got != want {
			t.Errorf("groupsPerMap(%d) = %d, want %d", n, got, want)
		}
	}
}

// A group whose first hash another group holds is kept exactly: both
// keep their identifiers through lookups and releases.
func TestGroupTableCollision(t *testing.T) {
	a := groupKey{name: proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}, Port: "p", Protocol: v1.ProtocolTCP}}
	b := groupKey{name: a.name, local: true}
	tbl := newGroupTable(0)
	tbl.set(a, 1)
	// Give b's first hash to a slot of another key (what a collision is).
	hb, cb := groupHashes(b)
	tbl.byHash[hb] = groupSlot{id: 7, check: cb + 1}
	tbl.set(b, 2)
	if len(tbl.exact) != 1 {
		t.Fatalf("the colliding key went to the hashed map: %+v", tbl)
	}
	for k, want := range map[groupKey]uint32{a: 1, b: 2} {
		if id, ok := tbl.get(k); !ok || id != want {
			t.Errorf("get(%v) = %d, %v; want %d", k, id, ok, want)
		}
	}
	tbl.del(b)
	if _, ok := tbl.get(b); ok || tbl.byHash[hb].id != 7 {
		t.Errorf("deleting the colliding key: %+v", tbl)
	}
	var ids []uint32
	tbl.all(func(id uint32) { ids = append(ids, id) })
	if slices.Sort(ids); !slices.Equal(ids, []uint32{1, 7}) {
		t.Errorf("all = %v, want [1 7]", ids)
	}
}
