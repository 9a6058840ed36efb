package nftables

import (
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// installedPort is what the backend wrote for one service port: chain
// fingerprints and the elements it contributed, to diff against.
type installedPort struct {
	chains   map[string]chainMark
	sets     []*ruleset.Set
	elements map[string][]ruleset.Element
	groups   []groupKey
}

// chainMark identifies a chain's rules: a hash of their text, and their
// number (what a periodic check can count in the kernel).
type chainMark struct {
	hash  uint64
	rules int
}

func fingerprint(f ruleset.Family, c *ruleset.Chain) chainMark {
	h := fnv.New64a()
	h.Write([]byte(c.ChainText(f)))
	return chainMark{hash: h.Sum64(), rules: len(c.Rules)}
}

func newInstalledPort(f ruleset.Family, o *portObjects, groups []groupKey) *installedPort {
	ip := &installedPort{chains: map[string]chainMark{}, sets: o.sets, elements: o.elements, groups: groups}
	for _, c := range o.chains {
		ip.chains[c.Name] = fingerprint(f, c)
	}
	return ip
}

// elementRef is one element in the kernel and how many service ports
// contribute it (an endpoint IP in several services gives one hairpin
// element).
type elementRef struct {
	el ruleset.Element
	n  int
}

// elementRefs is, per set, the elements written, by key.
type elementRefs map[string]map[string]*elementRef

// refDelta stages element reference changes of one transaction; commit
// folds them into the refs once the kernel accepted it.
type refDelta struct {
	refs    elementRefs
	staged  map[string]map[string]*elementRef // copies of touched refs
	sets    map[string]*ruleset.Set
	adds    map[string][]ruleset.Element
	deletes map[string][]ruleset.Element
}

func newRefDelta(refs elementRefs, sets map[string]*ruleset.Set) *refDelta {
	return &refDelta{refs: refs, sets: sets, staged: map[string]map[string]*elementRef{},
		adds: map[string][]ruleset.Element{}, deletes: map[string][]ruleset.Element{}}
}

func (d *refDelta) ref(set, key string) *elementRef {
	if r, ok := d.staged[set][key]; ok {
		return r
	}
	r := &elementRef{}
	if old, ok := d.refs[set][key]; ok {
		*r = *old
	}
	if d.staged[set] == nil {
		d.staged[set] = map[string]*elementRef{}
	}
	d.staged[set][key] = r
	return r
}

// remove drops one port's contribution of the elements.
func (d *refDelta) remove(set string, els []ruleset.Element) {
	s := d.sets[set]
	for _, e := range els {
		r := d.ref(set, e.KeyText(s))
		if r.n--; r.n == 0 {
			d.deletes[set] = append(d.deletes[set], r.el)
		}
	}
}

// add records one port's contribution of the elements.
func (d *refDelta) add(set string, els []ruleset.Element) {
	s := d.sets[set]
	for _, e := range els {
		r := d.ref(set, e.KeyText(s))
		if r.n++; r.n == 1 {
			r.el = e
			d.adds[set] = append(d.adds[set], e)
		}
	}
}

// diff removes what old contributed and adds what cur contributes,
// skipping elements present in both.
func (d *refDelta) diff(old, cur map[string][]ruleset.Element) {
	for _, set := range slices.Sorted(maps.Keys(old)) {
		d.remove(set, subtract(d.sets[set], old[set], cur[set]))
	}
	for _, set := range slices.Sorted(maps.Keys(cur)) {
		d.add(set, subtract(d.sets[set], cur[set], old[set]))
	}
}

// subtract gives the elements of a not in b (same key and same data).
func subtract(s *ruleset.Set, a, b []ruleset.Element) []ruleset.Element {
	if len(b) == 0 {
		return a
	}
	in := make(map[string]bool, len(b))
	for _, e := range b {
		in[e.Text(s)] = true
	}
	var out []ruleset.Element
	for _, e := range a {
		if !in[e.Text(s)] {
			out = append(out, e)
		}
	}
	return out
}

// write appends the element operations: all deletions, then additions.
func (d *refDelta) write(tx *ruleset.Transaction) {
	for _, set := range slices.Sorted(maps.Keys(d.deletes)) {
		tx.DeleteElements(d.sets[set], d.deletes[set])
	}
	for _, set := range slices.Sorted(maps.Keys(d.adds)) {
		tx.AddElements(d.sets[set], d.adds[set])
	}
}

func (d *refDelta) commit() {
	for set, m := range d.staged {
		if d.refs[set] == nil {
			d.refs[set] = map[string]*elementRef{}
		}
		for k, r := range m {
			if r.n <= 0 {
				delete(d.refs[set], k)
			} else {
				d.refs[set][k] = r
			}
		}
	}
}

// sortedNames gives the service ports in a stable order.
func sortedNames[V any](m map[proxier.ServicePortName]V) []proxier.ServicePortName {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b proxier.ServicePortName) int {
		if c := compareStrings(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name); c != 0 {
			return c
		}
		return compareStrings(a.Port+"/"+string(a.Protocol), b.Port+"/"+string(b.Protocol))
	})
	return names
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ordersOf copies a port's group orders into the family's.
func mergeOrders(dst map[groupKey][]netip.AddrPort, src map[groupKey][]netip.AddrPort) {
	for k, v := range src {
		dst[k] = v
	}
}
