package nftables

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// liveSet is a set of the live table, read back for a full sync over it,
// so that the sync writes only the elements that differ. Elements the
// sync renders and finds are taken out; what is left at the end is
// deleted.
type liveSet struct {
	set *ruleset.Set
	// chains are the tags a verdict map's elements carry, by the chain
	// they go to; untagged marks a chain two elements disagree on or one
	// without a tag.
	chains chainTags
	// exact holds a plain set's or map's elements: packed key -> data
	// print.
	exact map[ruleset.PackedKey]uint64
	// intervals holds an endpoint map's ranges, by start.
	intervals []liveInterval
}

// liveInterval is one range of an endpoint map and the endpoint it
// holds; taken once a sync has matched or deleted it.
type liveInterval struct {
	start, end uint32
	to         endpoint
	taken      bool
}

// endpoint is an address and port without pointers (netip.Addr holds
// one), so that the collector does not scan a read-back map's ranges.
type endpoint struct {
	addr [16]byte
	port uint16
}

func endpointFrom(ap netip.AddrPort) endpoint {
	return endpoint{addr: ap.Addr().As16(), port: ap.Port()}
}

func (e endpoint) addrPort() netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(e.addr).Unmap(), e.port)
}

// readSets reads back the table's sets a full sync writes elements of
// (the shared sets and the endpoint maps). A set that cannot be read is
// left out: it is flushed and written whole.
func readSets(ctx context.Context, conn Conn, fc *familyConfig, existing []string) map[string]*liveSet {
	out := map[string]*liveSet{}
	for _, s := range liveSetsOf(fc, existing) {
		ls, err := readSet(ctx, conn, fc.nft, s)
		if err != nil {
			klog.ErrorS(err, "Reading back a set failed; the full sync rewrites it", "family", fc.nft, "set", s.Name)
			continue
		}
		out[s.Name] = ls
	}
	return out
}

// liveSetsOf describes the existing sets a full sync reads back: the
// shared sets and the endpoint maps.
func liveSetsOf(fc *familyConfig, existing []string) []*ruleset.Set {
	var out []*ruleset.Set
	for _, s := range baseSets(fc) {
		if slices.Contains(existing, s.Name) {
			out = append(out, s)
		}
	}
	for _, name := range existing {
		if strings.HasPrefix(name, endpointMapPrefix) {
			out = append(out, endpointMapSet(name))
		}
	}
	return out
}

func readSet(ctx context.Context, conn Conn, fam ruleset.Family, s *ruleset.Set) (*liveSet, error) {
	ls := &liveSet{set: s}
	unfit := 0
	if !s.Interval {
		ls.exact = map[ruleset.PackedKey]uint64{}
	}
	err := conn.ReadElements(ctx, fam, TableName, s, func(e *ruleset.Element) {
		if s.Interval {
			ls.intervals = append(ls.intervals, liveInterval{start: e.Key[0].Num, end: e.KeyEnd[0].Num, to: endpointFrom(endpointOf(e))})
			return
		}
		k, ok := ruleset.PackKey(e.Key)
		if !ok {
			unfit++
			return
		}
		ls.exact[k] = e.DataPrint()
		if e.Verdict != nil && e.Verdict.Chain != "" {
			ls.addTag(e.Verdict.Chain, e.Tag)
		}
	})
	if err != nil {
		return nil, err
	}
	if unfit > 0 {
		return nil, fmt.Errorf("%d elements of %s have keys no set of switchyard's has", unfit, s.Name)
	}
	slices.SortFunc(ls.intervals, func(a, b liveInterval) int { return int64Cmp(a.start, b.start) })
	return ls, nil
}

// untagged stands for a chain whose tag is unknown: its print matches no
// render.
var untagged = &ruleset.ChainTag{}

// addTag records the tag an element carries for the chain it goes to.
func (ls *liveSet) addTag(chain string, t *ruleset.ChainTag) {
	if ls.chains == nil {
		ls.chains = chainTags{}
	}
	ls.chains.merge(chainHash(chain), t)
}

// tags merges the set's chain tags into out (a chain two sets disagree on
// is untagged).
func (ls *liveSet) tags(out chainTags) {
	for h, t := range ls.chains {
		out.merge(h, t)
	}
}

// chainTags are the live table's chain tags by a 64-bit hash of the
// chain's name (chainHash), not the name: at 44k Services x 2 ports the
// names read back from the elements would be held through the restart's
// render. A chain that shares a hash with another can only be rewritten
// without need (its tag then matches no render), or be taken for a
// tagged one when it is new, which the table's chain list (exact names)
// rules out first (chunker.keep).
type chainTags map[uint64]*ruleset.ChainTag

// get is the tag of the named chain, or nil.
func (c chainTags) get(name string) *ruleset.ChainTag { return c[chainHash(name)] }

// merge records t (nil: none) for the chain of hash h; a chain given two
// different tags is untagged.
func (c chainTags) merge(h uint64, t *ruleset.ChainTag) {
	if t == nil {
		t = untagged
	}
	if have, ok := c[h]; ok && !have.Equal(t) {
		t = untagged
	}
	c[h] = t
}

// endpointOf is an endpoint map element's endpoint.
func endpointOf(e *ruleset.Element) netip.AddrPort {
	if len(e.Data) != 2 {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(e.Data[0].Addr, uint16(e.Data[1].Num))
}

// block gives the index range of the intervals starting within the slot
// block [lo, lo+SlotSpace): one endpoint group's.
func (ls *liveSet) block(lo uint32) (int, int) {
	i, _ := slices.BinarySearchFunc(ls.intervals, lo, func(iv liveInterval, v uint32) int { return int64Cmp(iv.start, v) })
	j, _ := slices.BinarySearchFunc(ls.intervals, lo+ruleset.SlotSpace, func(iv liveInterval, v uint32) int { return int64Cmp(iv.start, v) })
	return i, j
}

// order is the endpoint order the live table holds for the group at
// offset: its ranges' endpoints by slot.
func (ls *liveSet) order(offset uint32) []netip.AddrPort {
	i, j := ls.block(offset)
	var out []netip.AddrPort
	for _, iv := range ls.intervals[i:j] {
		out = append(out, iv.to.addrPort())
	}
	return out
}

// elementDiff splits a chunk's elements of one set into those to write
// and those the live set holds already, and stages the deletion of what
// the live set holds in their place.
type elementDiff struct {
	add, del []ruleset.Element
	kept     int
}

// diff compares rendered elements with the live set, taking the ones it
// finds. A plain set's element is kept when the set maps its key to the
// same data, else deleted and added again; an endpoint group's ranges
// are kept when the group's slot block holds exactly them, else the
// block's ranges are deleted and the group's written.
func (ls *liveSet) diff(els []ruleset.Element) elementDiff {
	if ls.set.Interval {
		return ls.diffIntervals(els)
	}
	var d elementDiff
	for _, e := range els {
		k, fits := ruleset.PackKey(e.Key)
		data, ok := ls.exact[k]
		ok = ok && fits
		if ok {
			delete(ls.exact, k)
			if data == e.DataPrint() {
				d.kept++
				continue
			}
			d.del = append(d.del, ruleset.Element{Key: e.Key})
		}
		d.add = append(d.add, e)
	}
	return d
}

func (ls *liveSet) diffIntervals(els []ruleset.Element) elementDiff {
	var d elementDiff
	for len(els) > 0 {
		lo := els[0].Key[0].Num / ruleset.SlotSpace * ruleset.SlotSpace
		n := 1
		for n < len(els) && els[n].Key[0].Num/ruleset.SlotSpace*ruleset.SlotSpace == lo {
			n++
		}
		group := els[:n]
		els = els[n:]
		i, j := ls.block(lo)
		live := ls.intervals[i:j]
		if sameIntervals(live, group) {
			d.kept += len(group)
		} else {
			for _, iv := range live {
				if !iv.taken {
					d.del = append(d.del, intervalElement(iv))
				}
			}
			d.add = append(d.add, group...)
		}
		for k := range live {
			live[k].taken = true
		}
	}
	return d
}

// sameIntervals tells whether the live ranges are exactly the rendered
// ones, endpoint for endpoint.
func sameIntervals(live []liveInterval, els []ruleset.Element) bool {
	if len(live) != len(els) {
		return false
	}
	for i, e := range els {
		iv := live[i]
		if iv.taken || iv.start != e.Key[0].Num || iv.end != e.KeyEnd[0].Num || iv.to != endpointFrom(endpointOf(&e)) {
			return false
		}
	}
	return true
}

func intervalElement(iv liveInterval) ruleset.Element {
	return ruleset.Element{Key: []ruleset.Value{{Num: iv.start}}, KeyEnd: []ruleset.Value{{Num: iv.end}}}
}

// leftover is what no render claimed: the elements to delete at the end.
func (ls *liveSet) leftover(fam ruleset.Family) []ruleset.Element {
	var out []ruleset.Element
	for _, iv := range ls.intervals {
		if !iv.taken {
			out = append(out, intervalElement(iv))
		}
	}
	keys := make([]ruleset.PackedKey, 0, len(ls.exact))
	for k := range ls.exact {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b ruleset.PackedKey) int { return bytes.Compare(a[:], b[:]) })
	for _, k := range keys {
		vs, err := ruleset.UnpackKey(fam, ls.set.Key, k)
		if err != nil {
			continue // not a key this set can hold; it goes with the set
		}
		out = append(out, ruleset.Element{Key: vs})
	}
	return out
}
