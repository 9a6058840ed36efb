package userspace

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ConntrackTable deletes conntrack entries of the node's namespace;
// conntrack.NetlinkTable is one.
//
// UDP needs it. A client's datagrams keep following the conntrack entry
// of its first one, REDIRECTed to a proxy port, for as long as the client
// keeps sending. When that proxy socket closes (its service port went
// away) or loses every endpoint (the rules now REJECT or DROP), the entry
// would keep sending the client's datagrams to a closed port or to a
// proxy that can only drop them; deleting it lets the next datagram meet
// the rules in force. TCP needs nothing: a connection ends, and the next
// one is NEW.
type ConntrackTable interface {
	Delete(family v1.IPFamily, filter netlink.CustomConntrackFilter) (int, error)
}

// flushKey is a UDP proxy port whose NATed conntrack entries must go.
type flushKey struct {
	family v1.IPFamily
	port   uint16
}

// natedToPort matches UDP entries REDIRECTed or DNATed to a proxy port:
// replies come from the port, though the client sent elsewhere.
type natedToPort struct{ port uint16 }

func (f natedToPort) MatchConntrackFlow(fl *netlink.ConntrackFlow) bool {
	return fl.Forward.Protocol == syscall.IPPROTO_UDP && fl.Reverse.SrcPort == f.port && fl.Forward.DstPort != f.port
}

// conntrackFlush holds the UDP proxy ports whose entries must go; the
// relay set adds a port when its socket closes or loses its last
// endpoint.
type conntrackFlush map[flushKey]struct{}

func (f conntrackFlush) add(fam v1.IPFamily, port uint16) {
	f[flushKey{family: fam, port: port}] = struct{}{}
}

// run deletes the entries of every pending port (all are dropped without
// a table). Ports that fail stay pending for the next sync.
func (f conntrackFlush) run(table ConntrackTable) error {
	if table == nil {
		clear(f)
		return nil
	}
	var errs []error
	for k := range f {
		n, err := table.Delete(k.family, natedToPort{port: k.port})
		if err != nil {
			errs = append(errs, fmt.Errorf("userspace: delete conntrack entries of UDP proxy port %d: %w", k.port, err))
			continue
		}
		delete(f, k)
		klog.V(4).InfoS("Deleted conntrack entries of a UDP proxy port", "family", k.family, "port", k.port, "entries", n)
	}
	return errors.Join(errs...)
}
