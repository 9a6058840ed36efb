package nftables

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TableName is the table switchyard owns in each family, the name
// upstream kube-proxy's nftables mode uses.
const TableName = "kube-proxy"

// DefaultMasqueradeBit is kube-proxy's default --iptables-masquerade-bit
// (mark 0x4000), which its nftables mode uses too.
const DefaultMasqueradeBit = 14

// DefaultAffinitySize bounds each session-affinity set (clients of one
// endpoint of one service port).
const DefaultAffinitySize = 1 << 16

// Config configures the nftables backend.
type Config struct {
	// Families to program; empty means IPv4 only.
	Families []v1.IPFamily
	// LocalDetector tells pod ("local") traffic apart (--detect-local-mode):
	// local traffic to a cluster IP is not masqueraded, and local traffic
	// to an external destination of an externalTrafficPolicy Local
	// service may reach any endpoint. The rules match "ip saddr CIDR",
	// `iifname "br0"` or `iifname "cali*"`, as kube-proxy's nftables mode.
	LocalDetector proxier.LocalDetector
	// MasqueradeAll SNATs all traffic sent via a cluster IP.
	MasqueradeAll bool
	// MasqueradeBit is the mark bit that flags packets for SNAT; nil
	// means DefaultMasqueradeBit.
	MasqueradeBit *int32
	// MasqueradeTCPKeepPort masquerades TCP keeping the client's source
	// port where it is free, so an endpoint's TIME_WAIT socket for that
	// port sees the client's timestamps and sequence numbers of the same
	// 4-tuple again (see masqueradeRules). Unset, every masqueraded
	// connection gets a random source port ("fully-random"), as
	// kube-proxy does. Other protocols are always masqueraded
	// fully-random.
	MasqueradeTCPKeepPort bool
	// NodePortAddresses restricts NodePorts to these prefixes' local
	// addresses; empty means every local address but loopback.
	NodePortAddresses []netip.Prefix
	// ServiceTraffic counts each service port's new connections, packets
	// and bytes in per-element counters (--service-traffic-metrics; see
	// servicetraffic.go).
	ServiceTraffic bool
	// Conn commits transactions and lists the tables; required.
	Conn Conn
	// Registerer receives the nftables mode's own metrics; nil registers
	// none (they are still counted).
	Registerer prometheus.Registerer
	// VerifyInterval: a periodic sync (Diff.Verify), and a partial sync
	// once the last check is older, checks the table first
	// (reconcile.Cadence); 0 means reconcile.DefaultVerifyInterval,
	// negative never checks.
	VerifyInterval time.Duration
	// Clock times the checks; nil means the real clock.
	Clock clock.PassiveClock
}

// familyConfig is what one family's render needs.
type familyConfig struct {
	family         v1.IPFamily
	nft            ruleset.Family
	localDetector  proxier.LocalDetector
	masqueradeAll  bool
	masqueradeMark uint32
	tcpKeepPort    bool
	nodePortAddrs  []netip.Prefix
	loopback       netip.Prefix
	serviceTraffic bool
}

func (c *Config) validate() error {
	if c.Conn == nil {
		return fmt.Errorf("nftables backend: no netlink connection")
	}
	if b := c.MasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		return fmt.Errorf("nftables backend: masquerade bit %d not in 0..31", *b)
	}
	if err := c.LocalDetector.Validate(); err != nil {
		return fmt.Errorf("nftables backend: local-traffic detection: %w", err)
	}
	for _, f := range c.families() {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			return fmt.Errorf("nftables backend: unknown IP family %q", f)
		}
	}
	return nil
}

func (c *Config) families() []v1.IPFamily {
	if len(c.Families) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return c.Families
}

func (c *Config) forFamily(family v1.IPFamily) *familyConfig {
	bit := int32(DefaultMasqueradeBit)
	if c.MasqueradeBit != nil {
		bit = *c.MasqueradeBit
	}
	fc := &familyConfig{
		family:         family,
		nft:            ruleset.IPv4,
		masqueradeAll:  c.MasqueradeAll,
		masqueradeMark: uint32(1) << uint(bit),
		tcpKeepPort:    c.MasqueradeTCPKeepPort,
		loopback:       netip.MustParsePrefix("127.0.0.0/8"),
	}
	if family == v1.IPv6Protocol {
		fc.nft, fc.loopback = ruleset.IPv6, netip.MustParsePrefix("::1/128")
	}
	fc.localDetector = c.LocalDetector
	fc.serviceTraffic = c.ServiceTraffic
	fc.nodePortAddrs = proxier.PrefixesOfFamily(c.NodePortAddresses, family)
	return fc
}

// localMatch resolves the local-traffic detector for the family and node.
func (fc *familyConfig) localMatch(node proxier.NodeInfo) proxier.LocalMatch {
	return fc.localDetector.Match(fc.family, node)
}

// groupsOf lists the endpoint groups a service port uses in the family:
// none when the family's table has nothing of it (a single-stack port in
// the other family's table takes no identifier, and no map slot).
func (fc *familyConfig) groupsOf(sp *proxier.ServicePort) []groupKey {
	if !fc.serves(sp) {
		return nil
	}
	var out []groupKey
	if sp.UsesClusterEndpoints() {
		out = append(out, groupKey{name: sp.Name})
	}
	if sp.UsesLocalEndpoints() {
		out = append(out, groupKey{name: sp.Name, local: true})
	}
	return out
}

// serves tells whether the family's table has anything of the port: a
// usable protocol, a cluster IP of the family, a port number.
func (fc *familyConfig) serves(sp *proxier.ServicePort) bool {
	_, ok := ProtocolNumber(sp.Protocol)
	cip, hasIP := sp.ClusterIP(fc.family)
	return ok && hasIP && cip.IsValid() && sp.Port != 0
}
