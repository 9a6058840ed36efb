package conntrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// The table's own dump. netlink v1.3.1's ConntrackDeleteFilters and
// ConntrackTableList parse the ports of TCP and UDP tuples only, so SCTP
// entries reached filters without ports and could be matched by address
// only. kube-proxy deletes stale SCTP entries by port, as it does UDP
// ones; to do the same this file dumps the table itself and parses both
// tuples of every entry, ports included for any protocol whose tuple
// carries them (CTA_PROTO_SRC_PORT / CTA_PROTO_DST_PORT: TCP, UDP,
// UDP-Lite, SCTP, DCCP). Deletion still sends the kernel the entry's own
// attributes (tuples and id), as netlink does, so an entry recreated
// meanwhile is not hit.
//
// Flows handed to filters carry FamilyType, Forward and Reverse only
// (no mark, zone, timeouts or labels): every filter of this program
// decides on those.

// dumpFlows dumps the family's table through sock and calls fn with every
// entry, parsed, and its raw message (nfgenmsg and attributes).
func dumpFlows(sock *nl.SocketHandle, family v1.IPFamily, fn func(f *netlink.ConntrackFlow, raw []byte)) error {
	req := conntrackRequest(sock, family, nl.IPCTNL_MSG_CT_GET, unix.NLM_F_DUMP)
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if err != nil && !errors.Is(err, nl.ErrDumpInterrupted) {
		return err
	}
	for _, m := range msgs {
		f, perr := parseFlow(m)
		if perr != nil {
			continue // not an entry we can read; never matched
		}
		fn(f, m)
	}
	// An interrupted dump is still worth acting on: the entries read are
	// real; the caller reports the error and the next pass retries.
	return err
}

// deleteFlow deletes the entry of a dumped raw message. An entry already
// gone counts as deleted.
func deleteFlow(sock *nl.SocketHandle, family v1.IPFamily, raw []byte) error {
	req := conntrackRequest(sock, family, nl.IPCTNL_MSG_CT_DELETE, unix.NLM_F_ACK)
	req.AddRawData(raw[nl.SizeofNfgenmsg:])
	if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func conntrackRequest(sock *nl.SocketHandle, family v1.IPFamily, op, flags int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest((int(netlink.ConntrackTable)<<8)|op, flags)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: sock}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: uint8(inetFamily(family)), Version: nl.NFNETLINK_V0})
	return req
}

// parseFlow reads one dumped message: nfgenmsg, then CTA_TUPLE_ORIG and
// CTA_TUPLE_REPLY among the entry's attributes.
func parseFlow(m []byte) (*netlink.ConntrackFlow, error) {
	if len(m) < nl.SizeofNfgenmsg {
		return nil, fmt.Errorf("conntrack message of %d bytes", len(m))
	}
	attrs, err := nl.ParseRouteAttr(m[nl.SizeofNfgenmsg:])
	if err != nil {
		return nil, err
	}
	f := &netlink.ConntrackFlow{FamilyType: m[0]}
	var seen int
	for _, a := range attrs {
		switch a.Attr.Type & nl.NLA_TYPE_MASK {
		case nl.CTA_TUPLE_ORIG:
			err, seen = parseTuple(a.Value, &f.Forward), seen+1
		case nl.CTA_TUPLE_REPLY:
			err, seen = parseTuple(a.Value, &f.Reverse), seen+1
		}
		if err != nil {
			return nil, err
		}
	}
	if seen != 2 {
		return nil, errors.New("conntrack entry without both tuples")
	}
	return f, nil
}

// parseTuple reads CTA_TUPLE_IP and CTA_TUPLE_PROTO.
func parseTuple(b []byte, t *netlink.IPTuple) error {
	attrs, err := nl.ParseRouteAttr(b)
	if err != nil {
		return err
	}
	for _, a := range attrs {
		typ := a.Attr.Type & nl.NLA_TYPE_MASK
		if typ != nl.CTA_TUPLE_IP && typ != nl.CTA_TUPLE_PROTO {
			continue // CTA_TUPLE_ZONE: not nested
		}
		inner, err := nl.ParseRouteAttr(a.Value)
		if err != nil {
			return err
		}
		if typ == nl.CTA_TUPLE_IP {
			parseTupleIP(inner, t)
		} else if err := parseTupleProto(inner, t); err != nil {
			return err
		}
	}
	return nil
}

func parseTupleIP(attrs []syscall.NetlinkRouteAttr, t *netlink.IPTuple) {
	for _, a := range attrs {
		switch a.Attr.Type & nl.NLA_TYPE_MASK {
		case nl.CTA_IP_V4_SRC, nl.CTA_IP_V6_SRC:
			t.SrcIP = net.IP(append([]byte(nil), a.Value...))
		case nl.CTA_IP_V4_DST, nl.CTA_IP_V6_DST:
			t.DstIP = net.IP(append([]byte(nil), a.Value...))
		}
	}
}

func parseTupleProto(attrs []syscall.NetlinkRouteAttr, t *netlink.IPTuple) error {
	for _, a := range attrs {
		typ := a.Attr.Type & nl.NLA_TYPE_MASK
		switch {
		case typ == nl.CTA_PROTO_NUM && len(a.Value) >= 1:
			t.Protocol = a.Value[0]
		case typ == nl.CTA_PROTO_SRC_PORT && len(a.Value) >= 2:
			t.SrcPort = binary.BigEndian.Uint16(a.Value)
		case typ == nl.CTA_PROTO_DST_PORT && len(a.Value) >= 2:
			t.DstPort = binary.BigEndian.Uint16(a.Value)
		case typ == nl.CTA_PROTO_NUM || typ == nl.CTA_PROTO_SRC_PORT || typ == nl.CTA_PROTO_DST_PORT:
			return fmt.Errorf("short conntrack protocol attribute %d", typ)
		}
	}
	return nil
}
