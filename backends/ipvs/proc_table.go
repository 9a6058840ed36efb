package ipvs

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// parseProcTable reads the text of /proc/net/ip_vs (the kernel's
// ip_vs_info_seq_show): a line per virtual server, then an indented
// "->" line per real server, addresses and ports in hex:
//
//	TCP  0A60000A:0050 rr persistent 300 FFFFFFFF
//	  -> 0AF40102:1F90      Masq    1      0          0
//	UDP  [fd00:0000:0000:0000:0000:0000:0000:000a]:0035 rr
//	FWM  00010000 rr
func parseProcTable(data []byte) ([]TableEntry, error) {
	var out []TableEntry
	var dests []TableDest // every real server; each entry gets its part
	var first []int       // index in dests of each entry's first one
	var f [8]string       // fields of one line, without allocating
	text := string(data)
	for n := 1; len(text) > 0; n++ {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		k := fields(line, &f)
		switch {
		case k >= 6 && f[0] == "->" && len(out) > 0:
			d, err := parseProcDest(f[:k])
			if err != nil {
				return nil, fmt.Errorf("/proc/net/ip_vs line %d: %w", n, err)
			}
			dests = append(dests, d)
		case k >= 3 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP" || f[0] == "FWM"):
			s, err := parseProcService(f[:k])
			if err != nil {
				return nil, fmt.Errorf("/proc/net/ip_vs line %d: %w", n, err)
			}
			out = append(out, TableEntry{Service: s})
			first = append(first, len(dests))
		}
	}
	for i := range out {
		end := len(dests)
		if i+1 < len(out) {
			end = first[i+1]
		}
		out[i].Dests = dests[first[i]:end:end]
	}
	return out, nil
}

// fields splits line at blanks into f (at most len(f) fields) and returns
// how many it found: strings.Fields would allocate for each of the ~110k
// lines of a 10k-service table.
func fields(line string, f *[8]string) int {
	k := 0
	for k < len(f) {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			break
		}
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			i = len(line)
		}
		f[k], line = line[:i], line[i:]
		k++
	}
	return k
}

func parseProcService(f []string) (*ipvs.Service, error) {
	s := &ipvs.Service{SchedName: f[2]}
	if f[0] == "FWM" {
		mark, err := strconv.ParseUint(f[1], 16, 32)
		if err != nil {
			return nil, fmt.Errorf("fwmark %q: %w", f[1], err)
		}
		s.FWMark = uint32(mark)
	} else {
		ap, err := parseProcAddrPort(f[1])
		if err != nil {
			return nil, err
		}
		s.Address, s.Port = ap.Addr().AsSlice(), ap.Port()
		s.AddressFamily = addressFamily(proxier.FamilyOf(ap.Addr()))
		s.Protocol = protoNumber(procProto(f[0]))
	}
	for j := 3; j+1 < len(f); j++ {
		if f[j] == "persistent" {
			t, err := strconv.ParseUint(f[j+1], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("persistence timeout %q: %w", f[j+1], err)
			}
			s.Flags, s.Timeout = flagPersistent, uint32(t)
		}
	}
	return s, nil
}

// parseProcDest reads "-> ADDR:PORT FORWARD WEIGHT ACTIVE INACTIVE".
func parseProcDest(f []string) (TableDest, error) {
	ap, err := parseProcAddrPort(f[1])
	if err != nil {
		return TableDest{}, err
	}
	var n [3]int
	for j := range n {
		if n[j], err = strconv.Atoi(f[3+j]); err != nil {
			return TableDest{}, fmt.Errorf("real server %s: %w", ap, err)
		}
	}
	return TableDest{Addr: ap, Forward: forwardFlag(f[2]), Weight: n[0], Active: n[1], Inactive: n[2]}, nil
}

// forwardFlag maps the forwarding method the kernel prints to its flag.
func forwardFlag(name string) uint32 {
	switch name {
	case "Local":
		return ipvs.ConnectionFlagLocalNode
	case "Tunnel":
		return ipvs.ConnectionFlagTunnel
	case "Route":
		return ipvs.ConnectionFlagDirectRoute
	}
	return ipvs.ConnectionFlagMasq
}

// parseProcAddrPort reads "0A60000A:0050" or "[fd00:...:000a]:0035".
func parseProcAddrPort(s string) (netip.AddrPort, error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return netip.AddrPort{}, fmt.Errorf("address %q without port", s)
	}
	port, err := strconv.ParseUint(s[i+1:], 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port of %q: %w", s, err)
	}
	var a netip.Addr
	if host := s[:i]; strings.HasPrefix(host, "[") {
		a, err = netip.ParseAddr(strings.Trim(host, "[]"))
	} else {
		var v uint64
		v, err = strconv.ParseUint(host, 16, 32)
		a = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address of %q: %w", s, err)
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

func procProto(name string) v1.Protocol {
	switch name {
	case "UDP":
		return v1.ProtocolUDP
	case "SCTP":
		return v1.ProtocolSCTP
	}
	return v1.ProtocolTCP
}
