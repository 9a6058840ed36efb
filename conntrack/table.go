package conntrack

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
)

// Table is the kernel conntrack table of one network namespace, as the
// reconciler needs it.
type Table interface {
	// Delete makes one pass over the family's table and deletes every entry
	// filter matches. It returns the number deleted; on error some entries
	// may have been deleted already (the count says how many).
	Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error)
}

// NetlinkTable is the Table of a network namespace, through a netfilter
// netlink socket opened in that namespace.
type NetlinkTable struct {
	sock *nl.SocketHandle // dumps and deletes (dump.go)
}

var _ Table = (*NetlinkTable)(nil)

// NewNetlinkTable opens the conntrack table of the namespace ns
// (netns.None() for the caller's own). Close it when done.
func NewNetlinkTable(ns netns.NsHandle) (*NetlinkTable, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), syscall.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open netfilter netlink socket: %w", err)
	}
	return &NetlinkTable{sock: &nl.SocketHandle{Socket: s}}, nil
}

// Close releases the netlink socket.
func (t *NetlinkTable) Close() { t.sock.Close() }

// Delete implements Table: one dump, then one delete request per matched
// entry (by its own tuples and id, so an entry recreated meanwhile is not
// hit). Filters see the ports of SCTP entries too (dump.go).
func (t *NetlinkTable) Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error) {
	var n, failed int
	var firstErr error
	err := dumpFlows(t.sock, family, func(f *netlink.ConntrackFlow, raw []byte) {
		if !filter.MatchConntrackFlow(f) {
			return
		}
		if err := deleteFlow(t.sock, family, raw); err != nil {
			failed++
			firstErr = cmpOr(firstErr, err)
			return
		}
		n++
	})
	if failed > 0 {
		err = errors.Join(err, fmt.Errorf("%d deletes failed, first: %w", failed, firstErr))
	}
	if err != nil {
		return n, fmt.Errorf("delete %s conntrack entries: %w", family, err)
	}
	return n, nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// List returns the family's entries of the protocol (0 for all), for
// diagnostics and tests, with ports of SCTP entries too.
func (t *NetlinkTable) List(family v1.IPFamily, proto uint8) ([]*netlink.ConntrackFlow, error) {
	var out []*netlink.ConntrackFlow
	err := dumpFlows(t.sock, family, func(f *netlink.ConntrackFlow, _ []byte) {
		if proto == 0 || f.Forward.Protocol == proto {
			out = append(out, f)
		}
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
