package userspace

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// oobSize fits one IP_PKTINFO or IPV6_PKTINFO control message.
const oobSize = 128

// enablePktinfo makes the socket report each datagram's destination
// address. A socket on the wildcard address must answer from the address
// the client sent to: conntrack undoes the REDIRECT/DNAT only for replies
// from exactly that address.
func enablePktinfo(c *net.UDPConn, v4 bool) error {
	if v4 {
		return ipv4.NewPacketConn(c).SetControlMessage(ipv4.FlagDst, true)
	}
	return ipv6.NewPacketConn(c).SetControlMessage(ipv6.FlagDst, true)
}

// packetDst returns the destination address of a received datagram from
// its control messages (invalid if absent).
func packetDst(oob []byte, v4 bool) netip.Addr {
	var ip net.IP
	if v4 {
		var cm ipv4.ControlMessage
		if cm.Parse(oob) != nil {
			return netip.Addr{}
		}
		ip = cm.Dst
	} else {
		var cm ipv6.ControlMessage
		if cm.Parse(oob) != nil {
			return netip.Addr{}
		}
		ip = cm.Dst
	}
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// replyOOB is the control message that sends a datagram from src (nil:
// let routing choose).
func replyOOB(src netip.Addr, v4 bool) []byte {
	if !src.IsValid() {
		return nil
	}
	if v4 {
		return (&ipv4.ControlMessage{Src: src.AsSlice()}).Marshal()
	}
	return (&ipv6.ControlMessage{Src: src.AsSlice()}).Marshal()
}
