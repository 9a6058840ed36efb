package ipset

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The set types the IPVS backend uses.
const (
	HashIP        = "hash:ip"
	HashIPPort    = "hash:ip,port"
	HashIPPortIP  = "hash:ip,port,ip"
	HashIPPortNet = "hash:ip,port,net"
	HashNet       = "hash:net"
	BitmapPort    = "bitmap:port"
)

// Families as ipset names them.
const (
	FamilyINet  = "inet"
	FamilyINet6 = "inet6"
)

// Entry is one member of a set. Which fields count depends on the type:
// hash:ip uses IP; hash:ip,port IP, Proto and Port; hash:ip,port,ip adds
// IP2; hash:ip,port,net adds Net; bitmap:port uses Port only.
type Entry struct {
	IP    netip.Addr
	Proto string // "tcp", "udp" or "sctp"
	Port  uint16
	IP2   netip.Addr
	Net   netip.Prefix
}

// Format writes the entry as `ipset save` prints it for the type:
// "10.96.0.10,tcp:80", "10.244.1.2,tcp:8080,10.244.1.2",
// "198.51.100.1,tcp:80,10.0.0.0/8" (a host prefix without its length),
// "30080".
func (e Entry) Format(setType string) string {
	ipPort := func() string { return e.IP.String() + "," + e.Proto + ":" + strconv.Itoa(int(e.Port)) }
	switch setType {
	case HashIP:
		return e.IP.String()
	case HashIPPort:
		return ipPort()
	case HashIPPortIP:
		return ipPort() + "," + e.IP2.String()
	case HashNet:
		return netString(e.Net)
	case HashIPPortNet:
		return ipPort() + "," + netString(e.Net)
	case BitmapPort:
		return strconv.Itoa(int(e.Port))
	}
	return ""
}

// netString is a prefix as `ipset save` prints it: a host prefix
// without its length.
func netString(p netip.Prefix) string {
	p = p.Masked()
	if p.IsSingleIP() {
		return p.Addr().String()
	}
	return p.String()
}

// ParseEntry reads an entry of the type in the strict form Format writes
// (a hash:ip,port,net entry may also carry an explicit host length).
func ParseEntry(setType, s string) (Entry, error) {
	var e Entry
	parts := strings.Split(s, ",")
	want := map[string]int{HashIP: 1, HashIPPort: 2, HashIPPortIP: 3, HashIPPortNet: 3, HashNet: 1, BitmapPort: 1}[setType]
	if want == 0 {
		return e, fmt.Errorf("unsupported set type %q", setType)
	}
	if len(parts) != want {
		return e, fmt.Errorf("entry %q: want %d parts for %s", s, want, setType)
	}
	if setType == BitmapPort {
		p, err := strconv.ParseUint(parts[0], 10, 16)
		e.Port = uint16(p)
		return e, wrapEntry(s, err)
	}
	var err error
	if setType == HashNet {
		e.Net, err = parsePrefix(parts[0])
		return e, wrapEntry(s, err)
	}
	if e.IP, err = netip.ParseAddr(parts[0]); err != nil {
		return e, wrapEntry(s, err)
	}
	if setType == HashIP {
		return e, nil
	}
	if e.Proto, e.Port, err = parseProtoPort(parts[1]); err != nil {
		return e, wrapEntry(s, err)
	}
	switch setType {
	case HashIPPortIP:
		e.IP2, err = netip.ParseAddr(parts[2])
	case HashIPPortNet:
		e.Net, err = parsePrefix(parts[2])
	}
	return e, wrapEntry(s, err)
}

func wrapEntry(s string, err error) error {
	if err != nil {
		return fmt.Errorf("entry %q: %w", s, err)
	}
	return nil
}

func parseProtoPort(s string) (string, uint16, error) {
	proto, port, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("%q: want proto:port", s)
	}
	switch proto {
	case "tcp", "udp", "sctp":
	default:
		return "", 0, fmt.Errorf("unsupported protocol %q", proto)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	return proto, uint16(p), err
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Canonical rewrites an entry in Format's form, checking it on the way.
func Canonical(setType, s string) (string, error) {
	e, err := ParseEntry(setType, s)
	if err != nil {
		return "", err
	}
	return e.Format(setType), nil
}
