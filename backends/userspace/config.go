package userspace

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// DefaultUDPIdleTimeout is upstream kube-proxy's --udp-timeout default.
const DefaultUDPIdleTimeout = 250 * time.Millisecond

// DefaultUDPMaxSessions caps the UDP sessions of one proxy socket. Each
// session holds a socket (a file descriptor) and a goroutine; 1024 is
// well above what a DNS or syslog service sees from one node's clients
// within an idle timeout, and well below the daemon's file limit.
const DefaultUDPMaxSessions = 1024

// DefaultDialTimeout bounds one connection attempt to an endpoint. It
// covers the first SYN retransmission (1 s) and the second (3 s after the
// first SYN), so a single slow endpoint is not given up too early.
const DefaultDialTimeout = 3 * time.Second

// Defaults of the marks and the policy routing (see doc.go, "Restarts"
// and "Client addresses"). Bit 12 (0x1000) is clear of kube-proxy's
// masquerade (0x4000) and drop (0x8000) bits and of the 0xf00 nibble
// Cilium uses; table 2510 and priority 9000 sit well before the main
// table (32766).
const (
	DefaultMarkBit       = 12
	DefaultMasqueradeBit = 14
	DefaultRouteTable    = 2510
	DefaultRulePriority  = 9000
)

// Config configures the userspace backend.
type Config struct {
	// Runner runs iptables; required.
	Runner runner.Interface
	// Families are the IP families to proxy. Empty means IPv4 only.
	Families []v1.IPFamily
	// NodeIPs are this node's addresses: node-originated traffic is
	// DNATed to the first of each family. Empty means State.Node.Addresses.
	NodeIPs []netip.Addr
	// LocalDetector tells pod ("local") traffic apart (--detect-local-mode):
	// with externalTrafficPolicy Local, pod traffic to external
	// destinations is treated as cluster traffic (rules "-s CIDR", "-i
	// br0" or "-i cali+"), and pods are never dialed from (Transparent).
	LocalDetector proxier.LocalDetector
	// NodePortAddresses restricts NodePorts to the node's addresses
	// inside these prefixes (--nodeport-addresses, "primary" already
	// resolved), as in iptables mode: a family without prefixes of its
	// own, or with a /0, serves NodePorts on every local address.
	NodePortAddresses []netip.Prefix
	// PortReserver holds every TCP and UDP NodePort on the addresses
	// NodePorts are served on, so no local process can bind them
	// (nodeports.go). nil reserves nothing (unit tests; the daemon sets
	// HostPortReserver).
	PortReserver PortReserver
	// ListenIP is the address proxy sockets of its family bind to, and
	// the DNAT target of the rules instead of REDIRECT. Unset (or
	// unspecified) means 0.0.0.0 and :: with REDIRECT.
	ListenIP netip.Addr
	// UDPIdleTimeout closes UDP sessions idle this long. 0 means
	// DefaultUDPIdleTimeout.
	UDPIdleTimeout time.Duration
	// UDPMaxSessions caps the concurrent UDP sessions of each UDP proxy
	// socket (one per service port, family and traffic kind: see
	// doc.go). A datagram from a client without a session, arriving
	// when the cap is reached, is dropped and counted in
	// switchyard_userspace_udp_sessions_dropped_total. 0 means
	// DefaultUDPMaxSessions; negative means no cap.
	UDPMaxSessions int
	// DialTimeout bounds each TCP connection attempt to an endpoint. 0
	// means DefaultDialTimeout.
	DialTimeout time.Duration
	// VerifyInterval bounds the time between two checks that the kernel
	// still holds the rules (see sync.go): periodic syncs (Diff.Verify)
	// always check, other syncs once the last check is older. 0 means
	// reconcile.DefaultVerifyInterval; negative disables the checks.
	VerifyInterval time.Duration
	// Clock times session affinity, UDP idleness and rule checks. nil
	// means the real clock.
	Clock clock.WithTicker
	// Sockets opens the proxy's sockets. nil means HostSockets.
	Sockets Sockets
	// Registerer receives the backend's metrics; nil leaves them
	// unregistered.
	Registerer prometheus.Registerer
	// MarkBit is the bit of the packet mark that mangle PREROUTING sets
	// on packets for the proxy's transparent sockets: it tells the nat
	// rules that a proxy is listening (else they DNAT straight to the
	// endpoints) and selects the policy routing. 0 means DefaultMarkBit
	// (bit 0 cannot be chosen).
	MarkBit int
	// MasqueradeBit marks the connections the kernel fallback DNATs and
	// must masquerade (--iptables-masquerade-bit). 0 means
	// DefaultMasqueradeBit.
	MasqueradeBit int
	// RouteTable and RulePriority place the policy routing. 0 means
	// DefaultRouteTable / DefaultRulePriority.
	RouteTable, RulePriority int
	// Routing writes the policy routing; nil leaves it out (then
	// Transparent has no effect).
	Routing Routing
	// Transparent connects to the local endpoints of services with
	// externalTrafficPolicy Local from the client's own address (for
	// clients outside the pod network and the node), so that endpoints
	// see who connected, as in the kernel modes.
	Transparent bool
	// RestartFallback keeps service traffic flowing while no proxy runs
	// (a restart): each service address with endpoints gets a sentinel, a
	// transparent socket bound to it, and traffic nobody's sentinel marks
	// is DNATed straight to the endpoints (doc.go, "Restarts"). The price:
	// a sentinel listens on the service's address and port, and the
	// kernel then refuses a wildcard bind of that port on the node (a
	// hostNetwork pod's server on :80 while some Service has port 80).
	// Off, traffic from outside is always REDIRECTed to the proxy and is
	// refused while it is down.
	RestartFallback bool
	// ShutdownGrace: Close first hands new connections to the kernel
	// fallback, then lets relayed TCP connections finish for up to this
	// long before cutting them. 0 cuts them at once.
	ShutdownGrace time.Duration
	// Conntrack deletes the UDP conntrack entries that would keep
	// clients on a closed or endpoint-less proxy socket (see
	// ConntrackTable). nil skips that: such clients then wait for their
	// entry to expire.
	Conntrack ConntrackTable
}

func (c Config) withDefaults() (Config, error) {
	if c.Runner == nil {
		return c, fmt.Errorf("userspace backend: no iptables runner")
	}
	if len(c.Families) == 0 {
		c.Families = []v1.IPFamily{v1.IPv4Protocol}
	}
	for _, f := range c.Families {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			return c, fmt.Errorf("userspace backend: unknown IP family %q", f)
		}
	}
	if err := c.LocalDetector.Validate(); err != nil {
		return c, fmt.Errorf("userspace backend: local-traffic detection: %w", err)
	}
	if c.UDPIdleTimeout < 0 || c.DialTimeout < 0 {
		return c, fmt.Errorf("userspace backend: negative timeout")
	}
	if c.UDPIdleTimeout == 0 {
		c.UDPIdleTimeout = DefaultUDPIdleTimeout
	}
	if c.UDPMaxSessions == 0 {
		c.UDPMaxSessions = DefaultUDPMaxSessions
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.MarkBit == 0 {
		c.MarkBit = DefaultMarkBit
	}
	if c.MasqueradeBit == 0 {
		c.MasqueradeBit = DefaultMasqueradeBit
	}
	if c.MarkBit < 0 || c.MarkBit > 31 || c.MasqueradeBit < 0 || c.MasqueradeBit > 31 || c.MarkBit == c.MasqueradeBit {
		return c, fmt.Errorf("userspace backend: mark bits %d and %d must be distinct bits 1-31", c.MarkBit, c.MasqueradeBit)
	}
	if c.RouteTable == 0 {
		c.RouteTable = DefaultRouteTable
	}
	if c.RulePriority == 0 {
		c.RulePriority = DefaultRulePriority
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Sockets == nil {
		c.Sockets = HostSockets{}
	}
	c.ListenIP = c.ListenIP.Unmap()
	return c, nil
}

// listenIP is the address proxy sockets of the family bind to.
func (c *Config) listenIP(fam v1.IPFamily) netip.Addr {
	if c.ListenIP.IsValid() && familyOf(c.ListenIP) == fam {
		return c.ListenIP
	}
	if fam == v1.IPv4Protocol {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

func (c *Config) mark() uint32     { return 1 << c.MarkBit }
func (c *Config) masqMark() uint32 { return 1 << c.MasqueradeBit }

func (c *Config) policyRoute() PolicyRoute {
	return PolicyRoute{Mark: c.mark(), Table: c.RouteTable, Priority: c.RulePriority}
}

// hostIP is where node-originated traffic is DNATed: the listen address
// if one is set, else the node's first address of the family.
func (c *Config) hostIP(fam v1.IPFamily, node []netip.Addr) netip.Addr {
	if ip := c.listenIP(fam); !ip.IsUnspecified() {
		return ip
	}
	for _, list := range [][]netip.Addr{c.NodeIPs, node} {
		for _, ip := range list {
			if ip = ip.Unmap(); familyOf(ip) == fam && !ip.IsLoopback() {
				return ip
			}
		}
	}
	return netip.Addr{}
}

func familyOf(a netip.Addr) v1.IPFamily {
	if a.Unmap().Is4() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

func familyOfRunner(f runner.Family) v1.IPFamily {
	if f == runner.IPv6 {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

func runnerFamily(f v1.IPFamily) runner.Family {
	if f == v1.IPv6Protocol {
		return runner.IPv6
	}
	return runner.IPv4
}
