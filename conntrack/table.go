package conntrack

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
)

// Table is the kernel conntrack table of one network namespace, as the
// reconciler needs it.
type Table interface {
	// Delete makes one pass over the family's table and deletes every entry
	// filter matches. It returns the number deleted; on error some entries
	// may have been deleted already (the count says how many). A filter
	// that is a Scoped may have the table look at only part of it.
	Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error)
}

// Scoped is a filter that can match only entries the kernel can pick out
// by itself: of one protocol, to one service address. A Table may ask the
// kernel for those entries alone (one dump per element); the filter still
// decides on each entry it gets.
type Scoped interface {
	// Scope returns the kernel filters; nil means the whole table.
	Scope() []ctnetlink.Filter
}

// Counter is a Table that can tell how many entries it holds, without
// a walk.
type Counter interface {
	Count() (int, error)
}

// NetlinkTable is the Table of a network namespace, through netfilter
// netlink sockets opened in that namespace: one dumps, one deletes.
type NetlinkTable struct {
	dump, del *ctnetlink.Conn
}

var _ Table = (*NetlinkTable)(nil)

// NewNetlinkTable opens the conntrack table of the namespace ns
// (netns.None() for the caller's own). Close it when done.
func NewNetlinkTable(ns netns.NsHandle) (*NetlinkTable, error) {
	dump, err := ctnetlink.Open(ns)
	if err != nil {
		return nil, err
	}
	del, err := ctnetlink.Open(ns)
	if err != nil {
		dump.Close()
		return nil, err
	}
	return &NetlinkTable{dump: dump, del: del}, nil
}

// Close releases the netlink sockets.
func (t *NetlinkTable) Close() {
	t.dump.Close()
	t.del.Close()
}

// Delete implements Table: one streamed dump per element of the filter's
// Scope (the kernel sends only the entries of that protocol and service
// address, when it supports CTA_FILTER), and the matched entries deleted
// by their own tuples and id, many to a sendmsg, while the dump goes on.
// An entry already gone counts as deleted. Filters see the ports of SCTP
// entries too (dump.go).
func (t *NetlinkTable) Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error) {
	fam := uint8(inetFamily(family))
	batch := t.del.NewBatch(fam, ctnetlink.MsgDelete)
	var r flowReader
	var matched int
	var errs []error
	for _, f := range kernelFilters(filter) {
		err := t.dump.Dump(fam, f, func(attrs []byte) error {
			if !r.read(fam, attrs) || !filter.MatchConntrackFlow(&r.f) {
				return nil
			}
			matched++
			return batch.AddRaw(attrs)
		})
		if err != nil {
			// An interrupted dump is still worth acting on: the entries
			// read are real; the next pass retries.
			errs = append(errs, err)
			if !errors.Is(err, ctnetlink.ErrDumpInterrupted) {
				break
			}
		}
	}
	if err := batch.Flush(); err != nil {
		errs = append(errs, err)
	}
	failed, first := batch.Errors(syscall.ENOENT)
	if failed > 0 {
		errs = append(errs, fmt.Errorf("%d deletes failed, first: %w", failed, first))
	}
	n := max(0, matched-failed)
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("delete %s conntrack entries: %w", family, err)
	}
	return n, nil
}

// kernelFilters is a filter's Scope: one unfiltered dump without one.
func kernelFilters(filter netlink.CustomConntrackFilter) []ctnetlink.Filter {
	if s, ok := filter.(Scoped); ok && s.Scope() != nil {
		return s.Scope()
	}
	return []ctnetlink.Filter{{}}
}

// Count implements Counter: the kernel's count of the namespace's
// entries (all families).
func (t *NetlinkTable) Count() (int, error) { return t.dump.Count() }

// List returns the family's entries of the protocol (0 for all), for
// diagnostics and tests, with ports of SCTP entries too.
func (t *NetlinkTable) List(family v1.IPFamily, proto uint8) ([]*netlink.ConntrackFlow, error) {
	fam := uint8(inetFamily(family))
	var out []*netlink.ConntrackFlow
	var r flowReader
	err := t.dump.Dump(fam, ctnetlink.Filter{Proto: proto}, func(attrs []byte) error {
		if r.read(fam, attrs) && (proto == 0 || r.f.Forward.Protocol == proto) {
			out = append(out, cloneFlow(&r.f))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s conntrack entries: %w", family, err)
	}
	return out, nil
}

// inetFamily maps an IP family to the netlink address family.
func inetFamily(f v1.IPFamily) netlink.InetFamily {
	if f == v1.IPv6Protocol {
		return netlink.InetFamily(syscall.AF_INET6)
	}
	return netlink.InetFamily(syscall.AF_INET)
}
