package iptables

import (
	"fmt"
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// DefaultChunkRules is the default bound on the number of lines of one
// iptables-restore transaction in a sync. iptables-nft with --noflush is
// quadratic in the size of one transaction; ~4,000-rule chunks measured
// linear (see shared/PERF-FACTS.md).
const DefaultChunkRules = 4000

// DefaultMasqueradeBit is kube-proxy's default --iptables-masquerade-bit.
const DefaultMasqueradeBit = 14

// Config configures the iptables backend.
type Config struct {
	// Families are the IP families to program, one render and one set of
	// restores each. Empty means IPv4 only.
	Families []v1.IPFamily
	// LocalDetector tells pod ("local") traffic from other traffic
	// (--detect-local-mode): the rules render its match for each family
	// and node (proxier.LocalDetector.Match), as kube-proxy's local
	// traffic detectors.
	LocalDetector proxier.LocalDetector
	// MasqueradeAll SNATs all traffic sent via a cluster IP.
	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit that flags packets for SNAT
	// (0..31); nil means DefaultMasqueradeBit (mark 0x4000).
	MasqueradeBit *int32
	// MasqueradeTCPKeepPort masquerades TCP keeping the client's source
	// port where it is free (see masqueradeRules). Unset, every
	// masqueraded connection gets a random source port (--random-fully),
	// as kube-proxy does. Other protocols are always masqueraded
	// --random-fully.
	MasqueradeTCPKeepPort bool
	// NodePortAddresses restricts NodePorts to local addresses inside these
	// prefixes. Empty means every local address (addrtype LOCAL). A family
	// with no prefix of its own matches every local address, as in
	// kube-proxy.
	NodePortAddresses []netip.Prefix
	// LocalhostNodePorts makes IPv4 NodePorts answer on 127.0.0.0/8 (the
	// caller must also set net.ipv4.conf.all.route_localnet=1), and adds
	// kube-proxy's KUBE-FIREWALL rule that blocks martian localnet traffic.
	LocalhostNodePorts bool
	// NFAcct makes the rules update kube-proxy's nfacct counters:
	// nfacct.CTStateInvalidDropped on the INVALID drop in KUBE-FORWARD and
	// nfacct.LocalhostNodePortsAccepted on localhost NodePorts. The caller
	// must have created both (nfacct.Interface.Ensure).
	NFAcct bool
	// ConntrackTCPLiberal is set when nf_conntrack_tcp_be_liberal=1: out of
	// window packets are no longer INVALID, and KUBE-FORWARD does not drop
	// INVALID packets, as in kube-proxy.
	ConntrackTCPLiberal bool
	// ServiceTraffic counts each service port's new connections, packets
	// and bytes in ipsets with counters (--service-traffic-metrics; see
	// servicetraffic.go); CounterSets is then required.
	ServiceTraffic bool
	CounterSets    CounterSets
	// Runner runs iptables; required.
	Runner runner.Interface
	// Metrics receives the iptables metrics; nil disables them.
	Metrics *metrics.Metrics
	// Registerer receives switchyard_rules_repaired_total; nil: counted,
	// not exported.
	Registerer prometheus.Registerer
	// ChunkRules bounds the lines of one restore transaction during a
	// sync; 0 means DefaultChunkRules. Ignored on legacy iptables, which
	// rewrites the whole table on every commit anyway (one transaction).
	ChunkRules int
	// VerifyInterval bounds the time between two verifications of the
	// top-level chains during partial syncs (see sync.go); 0 means
	// reconcile.DefaultVerifyInterval, a negative value disables
	// verification.
	VerifyInterval time.Duration
	// Clock times verifications; nil means the real clock.
	Clock clock.PassiveClock
}

// familyConfig is the part of Config one family's render needs.
type familyConfig struct {
	family             v1.IPFamily
	localDetector      proxier.LocalDetector
	masqueradeAll      bool
	masqueradeMark     string // "0x4000"
	tcpKeepPort        bool
	nodePortAddresses  []netip.Prefix
	localhostNodePorts bool
	nfacct             bool
	dropInvalid        bool
	serviceTraffic     bool
}

func (c *Config) validate() error {
	if c.Runner == nil {
		return fmt.Errorf("iptables backend: no runner")
	}
	if b := c.MasqueradeBit; b != nil && (*b < 0 || *b > 31) {
		return fmt.Errorf("iptables backend: masquerade bit %d not in 0..31", *b)
	}
	for _, f := range c.families() {
		if f != v1.IPv4Protocol && f != v1.IPv6Protocol {
			return fmt.Errorf("iptables backend: unknown IP family %q", f)
		}
	}
	if err := c.LocalDetector.Validate(); err != nil {
		return fmt.Errorf("iptables backend: local-traffic detection: %w", err)
	}
	if c.ServiceTraffic && c.CounterSets == nil {
		return fmt.Errorf("iptables backend: service traffic counters without ipsets")
	}
	if c.ChunkRules < 0 {
		return fmt.Errorf("iptables backend: negative chunk size %d", c.ChunkRules)
	}
	return nil
}

func (c *Config) families() []v1.IPFamily {
	if len(c.Families) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return c.Families
}

func (c *Config) chunkRules() int {
	if c.ChunkRules == 0 {
		return DefaultChunkRules
	}
	return c.ChunkRules
}

// forFamily derives the render configuration of one family.
func (c *Config) forFamily(family v1.IPFamily) *familyConfig {
	bit := int32(DefaultMasqueradeBit)
	if c.MasqueradeBit != nil {
		bit = *c.MasqueradeBit
	}
	fc := &familyConfig{
		family:             family,
		masqueradeAll:      c.MasqueradeAll,
		masqueradeMark:     fmt.Sprintf("%#x", uint32(1)<<uint(bit)),
		tcpKeepPort:        c.MasqueradeTCPKeepPort,
		localhostNodePorts: c.LocalhostNodePorts && family == v1.IPv4Protocol,
		nfacct:             c.NFAcct,
		dropInvalid:        !c.ConntrackTCPLiberal,
		localDetector:      c.LocalDetector,
		serviceTraffic:     c.ServiceTraffic,
	}
	fc.nodePortAddresses = proxier.PrefixesOfFamily(c.NodePortAddresses, family)
	return fc
}
