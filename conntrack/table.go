package conntrack

import (
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
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
	h *netlink.Handle
}

var _ Table = (*NetlinkTable)(nil)

// NewNetlinkTable opens the conntrack table of the namespace ns
// (netns.None() for the caller's own). Close it when done.
func NewNetlinkTable(ns netns.NsHandle) (*NetlinkTable, error) {
	h, err := netlink.NewHandleAt(ns, syscall.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open netfilter netlink socket: %w", err)
	}
	return &NetlinkTable{h: h}, nil
}

// Close releases the netlink socket.
func (t *NetlinkTable) Close() { t.h.Close() }

// Delete implements Table with netlink's ConntrackDeleteFilters: one dump,
// then one delete request per matched entry (by its full tuple and id, so
// an entry recreated meanwhile is not hit).
func (t *NetlinkTable) Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error) {
	n, err := t.h.ConntrackDeleteFilters(netlink.ConntrackTable, inetFamily(family), filter)
	if err != nil {
		return int(n), fmt.Errorf("delete %s conntrack entries: %w", family, err)
	}
	return int(n), nil
}

// List returns the family's entries of the protocol (0 for all), for
// diagnostics and tests. SCTP entries come without ports (netlink v1.3.1
// parses ports of TCP and UDP only).
func (t *NetlinkTable) List(family v1.IPFamily, proto uint8) ([]*netlink.ConntrackFlow, error) {
	flows, err := t.h.ConntrackTableList(netlink.ConntrackTable, inetFamily(family))
	if err != nil {
		return nil, fmt.Errorf("list %s conntrack entries: %w", family, err)
	}
	if proto == 0 {
		return flows, nil
	}
	out := flows[:0]
	for _, f := range flows {
		if f.Forward.Protocol == proto {
			out = append(out, f)
		}
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
