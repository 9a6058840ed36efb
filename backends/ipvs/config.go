package ipvs

import (
	"fmt"
	"math/bits"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// DummyInterface is the interface every service address is bound to, so
// that the node accepts the packets and IPVS (in LOCAL_IN) sees them.
const DummyInterface = "kube-ipvs0"

// Defaults.
const (
	DefaultScheduler     = "rr"
	DefaultMasqueradeBit = 14
	// DefaultInternalMarkMask holds the firewall marks of the fwmark
	// virtual services that give in-cluster clients every endpoint of an
	// externalTrafficPolicy=Local service (see doc.go).
	DefaultInternalMarkMask uint32 = 0x0fff0000
	// DefaultGracefulTerminationTimeout bounds how long a removed TCP real
	// server is kept at weight 0 while it still has connections.
	DefaultGracefulTerminationTimeout = 15 * time.Minute
)

// Config configures the IPVS backend.
type Config struct {
	// Kernel holds the kernel interfaces (NewKernel, or fakes); required.
	*Kernel
	// Families are the IP families to program. Empty means IPv4 only.
	Families []v1.IPFamily
	// Scheduler is the IPVS scheduler: rr (default), lc, dh, sh, wrr,
	// wlc, sed, nq or mh.
	Scheduler string
	// LocalDetector tells pod ("local") traffic apart (--detect-local-mode):
	// local traffic to a cluster IP is not masqueraded, and local traffic
	// to external addresses is internal traffic (the fwmark services).
	// The companion iptables rules match "-s CIDR", "-i br0" or "-i
	// cali+", as kube-proxy's IPVS mode.
	LocalDetector proxier.LocalDetector
	// MasqueradeAll masquerades all traffic to cluster IPs.
	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit flagging packets for SNAT; nil means
	// DefaultMasqueradeBit (0x4000).
	MasqueradeBit *int32
	// InternalMarkMask is the contiguous range of fwmark bits for the
	// internal-traffic virtual services; 0 means DefaultInternalMarkMask.
	InternalMarkMask uint32
	// NodePortAddresses restricts NodePorts to node addresses inside these
	// prefixes; a family without prefixes uses every node address.
	NodePortAddresses []netip.Prefix
	// ExcludeCIDRs (--ipvs-exclude-cidrs) are addresses the backend never
	// cleans up: virtual servers on them that no Service wants, and such
	// addresses on kube-ipvs0, belong to someone else (keepalived, say).
	ExcludeCIDRs []netip.Prefix
	// StrictARP sets arp_ignore=1 and arp_announce=2 so the node does not
	// answer ARP for the service addresses on kube-ipvs0.
	StrictARP bool
	// TCPTimeout, TCPFinTimeout and UDPTimeout are IPVS connection
	// timeouts; 0 leaves the kernel's value alone.
	TCPTimeout, TCPFinTimeout, UDPTimeout time.Duration
	// GracefulTerminationTimeout bounds the wait for a removed TCP real
	// server's connections; 0 means DefaultGracefulTerminationTimeout.
	GracefulTerminationTimeout time.Duration
	// Registerer receives the switchyard_ipvs_* collector; nil: none.
	Registerer prometheus.Registerer
	// VerifyInterval is how old the last check of the kernel state may be
	// before a partial sync checks again (verify.go; the periodic sync,
	// Diff.Verify, always checks): changes that keep arriving postpone the
	// periodic sync. 0 means reconcile.DefaultVerifyInterval; negative: never check.
	VerifyInterval time.Duration
	// Clock is for graceful termination deadlines and the verification
	// interval; nil means real time.
	Clock clock.PassiveClock
}

// schedulers lists the IPVS schedulers accepted.
var schedulers = map[string]bool{"rr": true, "lc": true, "dh": true, "sh": true,
	"wrr": true, "wlc": true, "sed": true, "nq": true, "mh": true}

func (c *Config) validate() error {
	k := c.Kernel
	if k == nil || k.IPVS == nil || k.Netlink == nil || k.IPSet == nil || k.Sysctl == nil || k.IPTables == nil {
		return fmt.Errorf("ipvs backend: incomplete Kernel (IPVS, Netlink, IPSet, Sysctl and IPTables are required)")
	}
	if c.Scheduler != "" && !schedulers[c.Scheduler] {
		return fmt.Errorf("ipvs backend: unknown scheduler %q", c.Scheduler)
	}
	if b := c.MasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		return fmt.Errorf("ipvs backend: masquerade bit %d not in 0..31", *b)
	}
	if m := c.internalMarkMask(); !contiguous(m) || m&c.masqueradeMark() != 0 {
		return fmt.Errorf("ipvs backend: internal mark mask %#x must be contiguous and not hold the masquerade bit", m)
	}
	if err := c.LocalDetector.Validate(); err != nil {
		return fmt.Errorf("ipvs backend: local-traffic detection: %w", err)
	}
	for _, f := range c.families() {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			return fmt.Errorf("ipvs backend: unknown IP family %q", f)
		}
	}
	for _, d := range []time.Duration{c.TCPTimeout, c.TCPFinTimeout, c.UDPTimeout, c.GracefulTerminationTimeout} {
		if d < 0 {
			return fmt.Errorf("ipvs backend: negative timeout %v", d)
		}
	}
	return nil
}

// contiguous reports whether the set bits of m form one run.
func contiguous(m uint32) bool {
	if m == 0 {
		return false
	}
	run := m >> bits.TrailingZeros32(m)
	return run&(run+1) == 0
}

func (c *Config) families() []v1.IPFamily {
	if len(c.Families) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return c.Families
}

func (c *Config) scheduler() string {
	if c.Scheduler == "" {
		return DefaultScheduler
	}
	return c.Scheduler
}

func (c *Config) masqueradeMark() uint32 {
	bit := int32(DefaultMasqueradeBit)
	if c.MasqueradeBit != nil {
		bit = *c.MasqueradeBit
	}
	return uint32(1) << uint(bit)
}

func (c *Config) internalMarkMask() uint32 {
	if c.InternalMarkMask == 0 {
		return DefaultInternalMarkMask
	}
	return c.InternalMarkMask
}

func (c *Config) gracefulTimeout() time.Duration {
	if c.GracefulTerminationTimeout == 0 {
		return DefaultGracefulTerminationTimeout
	}
	return c.GracefulTerminationTimeout
}

// excluded reports whether a is inside one of ExcludeCIDRs.
func (c *Config) excluded(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range c.ExcludeCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// nodePortPrefixes keeps the NodePortAddresses of one family; nil means
// every node address of the family.
func (c *Config) nodePortPrefixes(f v1.IPFamily) []netip.Prefix {
	return proxier.PrefixesOfFamily(c.NodePortAddresses, f)
}
