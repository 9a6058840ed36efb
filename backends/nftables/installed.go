package nftables

import (
	"hash/maphash"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// written is what the kernel holds after our last commit, kept small: at
// 10k services x 10 endpoints the table has ~220k elements, and keeping
// them would cost more memory than the rest of the daemon. Instead a
// changed port's old objects are rendered again from what the Diff says
// the last sync saw (proxier.Diff.Previous) and the node kept here. Only
// counts stay, for the periodic check, and the one shared set's
// reference counts.
type written struct {
	node    *proxier.NodeInfo // of the last sync; nil before the first
	sets    map[string]*ruleset.Set
	rules   chainCounts    // rules per chain
	counts  map[string]int // elements per set (sets the packet path fills excluded)
	hairpin *addrCounts
}

func newWritten() *written {
	return &written{sets: map[string]*ruleset.Set{}, rules: chainCounts{},
		counts: map[string]int{}, hairpin: newAddrCounts()}
}

// delta stages the element changes of one transaction. Elements of the
// hairpin set are shared by every port with the endpoint's address, so
// they are reference-counted; every other element belongs to one port.
type delta struct {
	w       *written
	hairpin map[netip.Addr]int // staged counts of touched addresses
	adds    map[string][]ruleset.Element
	deletes map[string][]ruleset.Element
}

func newDelta(w *written) *delta {
	return &delta{w: w, hairpin: map[netip.Addr]int{},
		adds: map[string][]ruleset.Element{}, deletes: map[string][]ruleset.Element{}}
}

func (d *delta) hairpinCount(a netip.Addr) int {
	if n, ok := d.hairpin[a]; ok {
		return n
	}
	return d.w.hairpin.get(a)
}

// diff records what changes between a port's old and new elements.
func (d *delta) diff(old, cur map[string][]ruleset.Element) {
	for _, set := range slices.Sorted(maps.Keys(old)) {
		for _, e := range subtract(d.w.sets[set], old[set], cur[set]) {
			d.remove(set, e)
		}
	}
	for _, set := range slices.Sorted(maps.Keys(cur)) {
		for _, e := range subtract(d.w.sets[set], cur[set], old[set]) {
			d.add(set, e)
		}
	}
}

func (d *delta) remove(set string, e ruleset.Element) {
	if set == setHairpin {
		a := e.Key[0].Addr
		n := d.hairpinCount(a) - 1
		d.hairpin[a] = n
		if n > 0 {
			return
		}
	}
	d.deletes[set] = append(d.deletes[set], e)
}

func (d *delta) add(set string, e ruleset.Element) {
	if set == setHairpin {
		a := e.Key[0].Addr
		n := d.hairpinCount(a) + 1
		d.hairpin[a] = n
		if n > 1 {
			return
		}
	}
	d.adds[set] = append(d.adds[set], e)
}

// subtract gives the elements of a not in b (same key, same data, same
// tag: an element whose chain changes is written again with its tag).
func subtract(s *ruleset.Set, a, b []ruleset.Element) []ruleset.Element {
	if len(b) == 0 {
		return a
	}
	in := make(map[string]bool, len(b))
	for _, e := range b {
		in[e.Text(s)+e.Tag.Key()] = true
	}
	var out []ruleset.Element
	for _, e := range a {
		if !in[e.Text(s)+e.Tag.Key()] {
			out = append(out, e)
		}
	}
	return out
}

// write appends the element operations: all deletions, then additions
// (a changed element is deleted and added again).
func (d *delta) write(tx *ruleset.Transaction) {
	for _, set := range slices.Sorted(maps.Keys(d.deletes)) {
		tx.DeleteElements(d.w.sets[set], d.deletes[set])
	}
	for _, set := range slices.Sorted(maps.Keys(d.adds)) {
		tx.AddElements(d.w.sets[set], d.adds[set])
	}
}

// commit folds the delta into what was written.
func (d *delta) commit() {
	for a, n := range d.hairpin {
		d.w.hairpin.set(a, n)
	}
	for set, els := range d.deletes {
		d.w.counts[set] -= len(els)
	}
	for set, els := range d.adds {
		d.w.counts[set] += len(els)
	}
}

// sortedNames gives the service ports in a stable order: by
// "namespace/name", then "port/protocol". Each name's key is built once
// (a NUL between the two parts sorts as their comparison did): joining
// strings in the comparison made 12M allocations at 88k service ports.
func sortedNames[V any](m map[proxier.ServicePortName]V) []proxier.ServicePortName {
	type keyed struct {
		key  string
		name proxier.ServicePortName
	}
	ks := make([]keyed, 0, len(m))
	for n := range m {
		ks = append(ks, keyed{n.Namespace + "/" + n.Name + "\x00" + n.Port + "/" + string(n.Protocol), n})
	}
	slices.SortFunc(ks, func(a, b keyed) int { return strings.Compare(a.key, b.key) })
	names := make([]proxier.ServicePortName, len(ks))
	for i := range ks {
		names[i] = ks[i].name
	}
	return names
}

// chainCounts holds the rules written per chain, keyed by a 64-bit hash
// of the chain's name rather than the name: at 44k Services x 2 ports the
// names and their map cost 8.5 MB of live heap, the hashes 1.5 MB. Two
// of our chains sharing a hash (~1e-10 at 88k chains) could only hide
// one's flushing from the periodic check, or keep one stale chain until
// the next full sync.
type chainCounts map[uint64]int32

var chainSeed = maphash.MakeSeed()

func chainHash(name string) uint64 { return maphash.String(chainSeed, name) }

func (c chainCounts) set(name string, rules int) { c[chainHash(name)] = int32(rules) }
func (c chainCounts) del(name string)            { delete(c, chainHash(name)) }

func (c chainCounts) get(name string) (int, bool) {
	n, ok := c[chainHash(name)]
	return int(n), ok
}
