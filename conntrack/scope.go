package conntrack

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// What a pass looks at. The kernel walks its whole table for every dump,
// filter or not, but sending an entry to userspace costs far more than
// walking past one: in a table of 1M entries (make conntrack-scale, 2
// vCPUs shared with other work) a dump that sent nothing took 0.36 s and
// one that sent its 500k UDP entries 2.76 s, about 13 times the walk per
// entry sent. So a pass either asks for every entry of the protocols it
// cleans (a wide pass: one walk, every UDP/SCTP entry sent) or, when the
// Diff names few service addresses, for the entries of each of those
// addresses (a targeted pass: one walk per address, only their entries
// sent). Targeted is chosen when its walks cost less than the wide pass's
// sends would, judged from the share of the table the last wide pass was
// sent.
//
// Until a wide pass has measured that share in a table big enough for it
// to matter (learnMin entries), a targeted pass is made for up to
// blindTargeted addresses: its cost is bounded (that many walks), while
// a wide pass over a table that is mostly UDP costs up to sendWalkRatio
// walks.
const (
	// sendWalkRatio is the cost of an entry sent over one walked past.
	sendWalkRatio = 13
	// maxTargeted bounds the walks of a targeted pass.
	maxTargeted = 16
	// blindTargeted bounds them while the share is unknown.
	blindTargeted = 4
	// learnMin is the smallest table whose share is remembered.
	learnMin = 10000
)

// targets returns the service addresses a targeted pass would look at:
// those of the ports the Diff names (endpoints gone, newly serving,
// deleted) and the addresses gone; nil for a wide pass (a full sync, a failed pass
// before, or more addresses than walks pay for).
func (r *Reconciler) targets(st *proxier.State, diff *proxier.Diff, gone keySet, nodeIPs []netip.Addr) keySet {
	if r.retry || diff == nil || diff.Full {
		return nil
	}
	keys := keySet{}
	for k := range gone {
		keys[k] = struct{}{}
	}
	add := func(sp *proxier.ServicePort) {
		if sp == nil {
			return // deleted since: its addresses are in gone or Deleted
		}
		for _, fam := range r.cfg.Families {
			forEachKey(sp, fam, nodeIPs, func(k flowKey) { keys[k] = struct{}{} })
		}
	}
	for _, s := range diff.StaleEndpoints {
		add(st.Services[s.Name])
	}
	for name := range diff.NewlyServing {
		add(st.Services[name])
	}
	// A deleted port's addresses may still be served by another port
	// (renamed): their entries are decided by the index like any other.
	for _, sp := range diff.Deleted {
		add(sp)
	}
	if !r.targetedPays(walksOf(keys)) {
		return nil
	}
	return keys
}

// walksOf is how many kernel dumps a targeted pass over keys makes.
func walksOf(keys keySet) int {
	dumps := map[flowKey]bool{}
	for k := range keys {
		dumps[dumpKey(k)] = true
	}
	return len(dumps)
}

// dumpKey is what the kernel is asked for to find k's entries: its
// address and port for IPv4, its protocol and port alone for IPv6, whose
// address comparison the kernel has inverted (see ctnetlink.Filter).
func dumpKey(k flowKey) flowKey {
	if proxier.FamilyOf(k.addr) == v1.IPv6Protocol {
		return flowKey{proto: k.proto, port: k.port}
	}
	return k
}

// targetedPays tells whether n walks cost less than a wide pass.
func (r *Reconciler) targetedPays(n int) bool {
	switch {
	case n <= 1:
		return true // one walk: never more than the wide pass's
	case r.sentShare < 0:
		return n <= blindTargeted
	case n > maxTargeted:
		return false
	}
	return float64(n) < 1+sendWalkRatio*r.sentShare
}

// scopeOf is the kernel filters of one family's pass: one per target of
// the family, or one per protocol the index cleans for a wide pass.
//
// One filter per dumpKey: an IPv6 pass walks once per protocol and port
// and is sent the entries of every address on that port; the userspace
// filter decides every entry either way.
func scopeOf(ix serviceIndex, targets keySet, family v1.IPFamily) []ctnetlink.Filter {
	if targets == nil {
		return wideScope(ix)
	}
	var out []ctnetlink.Filter
	seen := map[flowKey]bool{}
	for k := range targets {
		if proxier.FamilyOf(k.addr) != family || seen[dumpKey(k)] {
			continue
		}
		seen[dumpKey(k)] = true
		out = append(out, ctnetlink.Filter{Proto: k.proto, OrigDst: netip.AddrPortFrom(k.addr, k.port)})
	}
	return out
}

// learn records, after a wide pass, the share of the table the kernel
// sent. A table that cannot count, or is too small for the choice to
// matter, leaves what was known.
func (r *Reconciler) learn(sent int) {
	c, ok := r.table.(Counter)
	if !ok {
		return
	}
	if n, err := c.Count(); err == nil && n >= learnMin {
		r.sentShare = min(1, float64(sent)/float64(n))
	}
}

// wideScope is a wide pass's scope: one filter per protocol the index
// cleans.
func wideScope(ix serviceIndex) []ctnetlink.Filter {
	var out []ctnetlink.Filter
	protos := map[uint8]bool{}
	for k := range ix {
		if !protos[k.proto] {
			protos[k.proto] = true
			out = append(out, ctnetlink.Filter{Proto: k.proto})
		}
	}
	return out
}
