package nftables

import (
	"hash/maphash"
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

// add counts what a render (or a chunk of one) writes: its sets, the
// elements it adds to every set, the rules of its chains.
func (w *written) add(d *desiredTable) {
	for _, s := range d.sets {
		w.sets[s.Name] = s
		if _, ok := w.counts[s.Name]; !ok && !s.Dynamic {
			w.counts[s.Name] = 0 // counted even while empty
		}
	}
	for name, els := range d.elements {
		if s := w.sets[name]; s != nil && !s.Dynamic {
			w.counts[name] += len(els)
		}
	}
	for _, c := range d.chains {
		w.rules.set(c.Name, len(c.Rules))
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
