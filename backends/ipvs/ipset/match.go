package ipset

import (
	"fmt"
	"net/netip"
)

// Packet is what an iptables set match (`-m set --match-set NAME DIRS`)
// reads from a packet.
type Packet struct {
	Src, Dst         netip.Addr
	Proto            string // "tcp", "udp" or "sctp"
	SrcPort, DstPort uint16
}

// dimensions of each type the match understands, in order.
var dimensions = map[string][]string{
	HashIP: {"ip"}, HashIPPort: {"ip", "port"}, HashIPPortIP: {"ip", "port", "ip2"},
	HashIPPortNet: {"ip", "port", "net"}, HashNet: {"net"}, BitmapPort: {"port"},
}

// Match reports whether the set holds the member that dirs ("src" or
// "dst", one per dimension of the set's type) pick from the packet, as
// the kernel's set match does: a hash set of the other family holds
// nothing of the packet's; a port dimension carries the packet's
// protocol (bitmap:port has only the port). An error means the match
// cannot be evaluated (a type it does not know, directions that do not
// fit the type).
func (s *Set) Match(dirs []string, p Packet) (bool, error) {
	dims, ok := dimensions[s.Type]
	if !ok {
		return false, fmt.Errorf("set type %s is not modelled", s.Type)
	}
	if len(dirs) != len(dims) {
		return false, fmt.Errorf("directions %v do not fit %s", dirs, s.Type)
	}
	for _, d := range dirs {
		if d != "src" && d != "dst" {
			return false, fmt.Errorf("direction %q", d)
		}
	}
	if s.Family != "" && (s.Family == FamilyINet6) != p.Dst.Is6() {
		return false, nil
	}
	if s.Type == HashNet || s.Type == HashIPPortNet {
		return s.matchNet(dirs, p)
	}
	_, ok = s.Entries[p.entry(dims, dirs).Format(s.Type)]
	return ok, nil
}

// entry is the member the directions pick from the packet.
func (p Packet) entry(dims, dirs []string) Entry {
	e := Entry{Proto: p.Proto}
	for i, dim := range dims {
		addr, port := p.Dst, p.DstPort
		if dirs[i] == "src" {
			addr, port = p.Src, p.SrcPort
		}
		switch dim {
		case "ip":
			e.IP = addr
		case "ip2":
			e.IP2 = addr
		case "port":
			e.Port = port
		case "net":
			e.Net = netip.PrefixFrom(addr, addr.BitLen())
		}
	}
	return e
}

// matchNet: a member's net holds the packet's address (and its other
// dimensions are equal).
func (s *Set) matchNet(dirs []string, p Packet) (bool, error) {
	want := p.entry(dimensions[s.Type], dirs)
	for member := range s.Entries {
		e, err := ParseEntry(s.Type, member)
		if err != nil {
			return false, fmt.Errorf("set %s: %w", s.Name, err)
		}
		if !e.Net.Contains(want.Net.Addr()) {
			continue
		}
		if s.Type == HashNet || (e.IP == want.IP && e.Proto == want.Proto && e.Port == want.Port) {
			return true, nil
		}
	}
	return false, nil
}
