package explain

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Listeners are the sockets of this network namespace that accept new
// connections: listening TCP sockets and unconnected UDP sockets, read
// once.
type Listeners interface {
	// Listening reports whether a socket of proto takes new connections
	// to addr: one bound to its port on its address or on the wildcard
	// address of its family.
	Listening(proto v1.Protocol, addr netip.AddrPort) bool
}

// SocketTable is the bound addresses of the accepting sockets, per
// protocol.
type SocketTable map[v1.Protocol][]netip.AddrPort

// Listening implements Listeners.
func (t SocketTable) Listening(proto v1.Protocol, addr netip.AddrPort) bool {
	return slices.ContainsFunc(t[proto], func(b netip.AddrPort) bool {
		return b.Port() == addr.Port() && (b.Addr() == addr.Addr() || b.Addr().IsUnspecified() && b.Addr().Is4() == addr.Addr().Is4())
	})
}

// Socket states of /proc/net/tcp and udp: a listening TCP socket, and a
// UDP socket that is not connected (TCP_CLOSE).
const (
	stateListen = "0A"
	stateClose  = "07"
)

// ReadSockets reads /proc/thread-self/net/{tcp,tcp6,udp,udp6}: the
// calling thread's network namespace (/proc/net follows the process's
// first thread, which may be elsewhere). Reading sends no traffic.
func ReadSockets() (SocketTable, error) {
	t := SocketTable{}
	for _, f := range []struct {
		file  string
		proto v1.Protocol
		state string
	}{{"tcp", v1.ProtocolTCP, stateListen}, {"tcp6", v1.ProtocolTCP, stateListen}, {"udp", v1.ProtocolUDP, stateClose}, {"udp6", v1.ProtocolUDP, stateClose}} {
		file, err := os.Open("/proc/thread-self/net/" + f.file)
		if os.IsNotExist(err) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return nil, err
		}
		bound, err := parseSockets(file, f.state)
		file.Close()
		if err != nil {
			return nil, fmt.Errorf("reading /proc/thread-self/net/%s: %w", f.file, err)
		}
		t[f.proto] = append(t[f.proto], bound...)
	}
	return t, nil
}

// parseSockets returns the local addresses of the sockets in state, from
// the text of /proc/net/tcp (or tcp6, udp, udp6): after a header line,
// "sl local_address rem_address st ...", addresses as hex "ADDR:PORT".
func parseSockets(r io.Reader, state string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	s := bufio.NewScanner(r)
	s.Scan() // the header
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 4 {
			return nil, fmt.Errorf("short line %q", s.Text())
		}
		if f[3] != state {
			continue
		}
		ap, err := parseHexAddrPort(f[1])
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, s.Err()
}

// parseHexAddrPort reads "0100007F:1F90": the address as the kernel's
// 32-bit words in host byte order, then the port.
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || (len(a) != 8 && len(a) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bad socket address %q", s)
	}
	raw, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad socket address %q: %w", s, err)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(raw[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), nil
}
