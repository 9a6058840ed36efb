// Package testing provides a stateful fake of the kernel conntrack table
// for tests of the conntrack reconciler and its users.
package conntracktest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
)

// Protocol numbers for entries.
const (
	TCP  uint8 = 6
	UDP  uint8 = 17
	SCTP uint8 = 132
)

// ErrExist is returned by Add for an entry whose original or reply tuple
// another entry has already, as the kernel answers EEXIST.
var ErrExist = errors.New("conntrack entry exists")

// Entry is one conntrack entry: the original tuple (as the client sent it)
// and the reply tuple (as the endpoint answers; its source is where the
// flow was DNATed to).
type Entry struct {
	Proto    uint8
	OrigSrc  netip.AddrPort
	OrigDst  netip.AddrPort
	ReplySrc netip.AddrPort
	ReplyDst netip.AddrPort
}

// NATed returns the entry of a flow from client to service that was DNATed
// to endpoint (with no SNAT).
func NATed(proto uint8, client, service, endpoint netip.AddrPort) Entry {
	return Entry{Proto: proto, OrigSrc: client, OrigDst: service, ReplySrc: endpoint, ReplyDst: client}
}

// Plain returns the entry of a flow that was not NATed.
func Plain(proto uint8, client, server netip.AddrPort) Entry {
	return NATed(proto, client, server, server)
}

// String formats the entry like conntrack -L.
func (e Entry) String() string {
	return fmt.Sprintf("proto=%d src=%s dst=%s reply-src=%s reply-dst=%s",
		e.Proto, e.OrigSrc, e.OrigDst, e.ReplySrc, e.ReplyDst)
}

// Family is the entry's IP family, or "" when its addresses mix families
// or are invalid.
func (e Entry) Family() v1.IPFamily {
	fam := func(a netip.AddrPort) v1.IPFamily {
		switch {
		case a.Addr().Is4():
			return v1.IPv4Protocol
		case a.Addr().Is6() && !a.Addr().Is4In6():
			return v1.IPv6Protocol
		}
		return ""
	}
	f := fam(e.OrigSrc)
	for _, a := range []netip.AddrPort{e.OrigDst, e.ReplySrc, e.ReplyDst} {
		if fam(a) != f {
			return ""
		}
	}
	return f
}

type tuple struct {
	proto    uint8
	src, dst netip.AddrPort
}

func (e Entry) orig() tuple  { return tuple{e.Proto, e.OrigSrc, e.OrigDst} }
func (e Entry) reply() tuple { return tuple{e.Proto, e.ReplySrc, e.ReplyDst} }

// Table is a fake conntrack table of one network namespace. It keeps
// entries per family, rejects what the kernel rejects (mixed families, a
// tuple already taken) and shows entries to filters the way netlink v1.3.1
// parses them: ports only for TCP and UDP, IPv4 addresses as 4-byte
// slices. It is safe for concurrent use.
type Table struct {
	mu      sync.Mutex
	entries []Entry
	passes  map[v1.IPFamily]int
	scopes  map[v1.IPFamily][]ctnetlink.Filter
	// failErr, when set, fails the next Delete before it touches anything.
	failErr error
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{passes: map[v1.IPFamily]int{}, scopes: map[v1.IPFamily][]ctnetlink.Filter{}}
}

// Add inserts entries, all or none.
func (t *Table) Add(entries ...Entry) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	taken := map[tuple]bool{}
	for _, e := range t.entries {
		taken[e.orig()], taken[e.reply()] = true, true
	}
	for _, e := range entries {
		if e.Family() == "" {
			return fmt.Errorf("add %s: addresses of mixed or invalid families", e)
		}
		if taken[e.orig()] || taken[e.reply()] {
			return fmt.Errorf("add %s: %w", e, ErrExist)
		}
		taken[e.orig()], taken[e.reply()] = true, true
	}
	t.entries = append(t.entries, entries...)
	return nil
}

// Entries returns the family's entries in insertion order.
func (t *Table) Entries(family v1.IPFamily) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(t.entries), func(e Entry) bool { return e.Family() != family })
}

// Passes reports how many Delete passes went over the family's table.
func (t *Table) Passes(family v1.IPFamily) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.passes[family]
}

// FailNextDelete makes the next Delete return err without deleting.
func (t *Table) FailNextDelete(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failErr = err
}

// Delete deletes the family's entries that filter matches, in one pass.
// A filter with a Scope (conntrack.Scoped) is offered only the entries
// one of its kernel filters lets through, as the kernel's dump filters
// do.
func (t *Table) Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.failErr; err != nil {
		t.failErr = nil
		return 0, fmt.Errorf("delete %s conntrack entries: %w", family, err)
	}
	t.passes[family]++
	var scope []ctnetlink.Filter
	if s, ok := filter.(interface{ Scope() []ctnetlink.Filter }); ok {
		scope = s.Scope()
	}
	t.scopes[family] = scope
	before := len(t.entries)
	t.entries = slices.DeleteFunc(t.entries, func(e Entry) bool {
		return e.Family() == family && offered(scope, e) && filter.MatchConntrackFlow(flowOf(e))
	})
	return before - len(t.entries), nil
}

func offered(scope []ctnetlink.Filter, e Entry) bool {
	if scope == nil {
		return true
	}
	orig := ctnetlink.Tuple{Proto: e.Proto, Src: e.OrigSrc, Dst: e.OrigDst}
	reply := ctnetlink.Tuple{Proto: e.Proto, Src: e.ReplySrc, Dst: e.ReplyDst}
	for _, f := range scope {
		if f.Matches(orig, reply) {
			return true
		}
	}
	return false
}

// LastScope returns the kernel filters of the family's last pass: nil
// for the whole table.
func (t *Table) LastScope(family v1.IPFamily) []ctnetlink.Filter {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.scopes[family]
}

// Count is how many entries the table holds, all families.
func (t *Table) Count() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries), nil
}

// flowOf renders an entry as netlink v1.3.1 parses a dumped one.
func flowOf(e Entry) *netlink.ConntrackFlow {
	fam := uint8(2) // AF_INET
	if e.Family() == v1.IPv6Protocol {
		fam = 10 // AF_INET6
	}
	return &netlink.ConntrackFlow{
		FamilyType: fam,
		Forward:    ipTuple(e.Proto, e.OrigSrc, e.OrigDst),
		Reverse:    ipTuple(e.Proto, e.ReplySrc, e.ReplyDst),
	}
}

func ipTuple(proto uint8, src, dst netip.AddrPort) netlink.IPTuple {
	t := netlink.IPTuple{Protocol: proto, SrcIP: ipOf(src.Addr()), DstIP: ipOf(dst.Addr())}
	if proto == TCP || proto == UDP || proto == SCTP {
		t.SrcPort, t.DstPort = src.Port(), dst.Port()
	}
	return t
}

func ipOf(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }
