package iptablestest

import (
	"fmt"
	"net/netip"
	"strings"
)

// SetPacket is what a "-m set" match looks up: the packet's addresses,
// protocol and ports where the rule sees it.
type SetPacket struct {
	Src, Dst         netip.Addr
	Protocol         string // "tcp", "udp" or "sctp"
	SrcPort, DstPort uint16
}

// IPSets answers "-m set --match-set NAME DIRS" for the tracer: whether
// the set holds the member that the directions ("src" or "dst", one per
// dimension of the set's type: "dst,dst,src" for hash:ip,port,ip) pick
// from the packet. The contents come from the kernel (`ipset save`) or
// a fake. An error means the match cannot be evaluated (an unknown set
// or type, contents that could not be read): the trace then fails
// rather than guess.
type IPSets interface {
	MatchSet(name string, dirs []string, p SetPacket) (bool, error)
}

// matchSet evaluates a set match with Packet.Sets. Only --match-set is
// modelled: counter conditions and --return-nomatch fail the trace.
func (t *tracer) matchSet(m Match, fl flow) (tri, error) {
	if t.pkt.Sets == nil {
		return matchNo, fmt.Errorf("ipset matches (-m set) need the sets' contents (Packet.Sets)")
	}
	var ms *Option
	for i, o := range m.Options {
		if o.Name != "--match-set" {
			return matchNo, fmt.Errorf("set %s is not modelled", o.Name)
		}
		ms = &m.Options[i]
	}
	if ms == nil || len(ms.Values) != 2 {
		return matchNo, fmt.Errorf("set match without --match-set NAME DIRS")
	}
	p := SetPacket{Src: t.pkt.SrcIP, Dst: fl.dst, Protocol: t.pkt.Protocol, SrcPort: t.pkt.SrcPort, DstPort: fl.dport}
	hit, err := t.pkt.Sets.MatchSet(ms.Values[0], strings.Split(ms.Values[1], ","), p)
	if err != nil {
		return matchNo, fmt.Errorf("set %s: %w", ms.Values[0], err)
	}
	return negate(hit, ms.Negated), nil
}
