package app

import (
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/switchyard-proxy/switchyard/conntrack"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Options is the validated, typed configuration the daemon is wired from.
// It is produced only by the command (defaults, then file, then flags).
type Options struct {
	// ConfigFile is the --config path ("" when none was given).
	ConfigFile string
	// Cleanup asks the daemon to remove its kernel state and exit.
	Cleanup bool
	// CleanupAfterRollback asks it to remove, from a kube-proxy nftables
	// table kube-proxy adopted, what only switchyard wrote, and exit.
	CleanupAfterRollback bool
	// InitOnly asks the daemon to make the node settings that need full
	// privileges (setupNode) and exit.
	InitOnly bool

	Mode Mode

	// Kubeconfig and Master locate the API server; both empty means
	// in-cluster configuration.
	Kubeconfig string
	Master     string
	// KubeAPIQPS, KubeAPIBurst and KubeAPIContentType tune the client.
	// A negative QPS disables client-side rate limiting (client-go rule).
	KubeAPIQPS         float32
	KubeAPIBurst       int
	KubeAPIContentType string
	// KubeAPIAcceptContentTypes is the client's Accept header
	// (clientConnection.acceptContentTypes; "" for client-go's default).
	KubeAPIAcceptContentTypes string
	// ConfigSyncPeriod is the informers' resync period.
	ConfigSyncPeriod time.Duration

	// HostnameOverride is the node name to use, lower-cased and trimmed as
	// kube-proxy does; "" means the machine's hostname.
	HostnameOverride string
	// ServiceProxyName, when set, restricts the daemon to Services labelled
	// service.kubernetes.io/service-proxy-name=<ServiceProxyName>.
	ServiceProxyName string

	// ClusterCIDRs holds at most one prefix per IP family (masked).
	ClusterCIDRs []netip.Prefix
	// LocalDetector is the local-traffic detection every mode renders
	// (--detect-local-mode and its settings; ClusterCIDR mode uses
	// ClusterCIDRs).
	LocalDetector proxier.LocalDetector
	// PrimaryFamily and Families (primary first) are the IP families the
	// daemon programs, decided at start as kube-proxy decides them
	// (decideFamilies), never from the cluster CIDRs.
	PrimaryFamily v1.IPFamily
	Families      []v1.IPFamily
	// IPTablesRunner is the runner the family probe opened at start,
	// reused by the backend (nil: it opens its own).
	IPTablesRunner *runner.Runner
	// NodePodCIDRs are the Node's spec.podCIDRs found at start in NodeCIDR
	// mode (awaitPodCIDRs); nil otherwise.
	NodePodCIDRs []netip.Prefix
	// MasqueradeAll SNATs all traffic sent to service IPs.
	MasqueradeAll bool
	// MasqueradeBit is the fwmark bit (0..31) that marks packets for SNAT.
	MasqueradeBit int
	// MasqueradeTCPKeepPort masquerades TCP keeping the client's source
	// port where it is free instead of a random one
	// (--masquerade-tcp-keep-port; iptables and nftables modes).
	MasqueradeTCPKeepPort bool

	// NodePortAddresses restricts NodePorts to local addresses inside these
	// prefixes (masked; keywords expanded). NodePortPrimary adds "the
	// node's primary IPs" (resolveNodePortAddresses); NodePortDefaulted
	// says the operator set nothing (nftables mode's default). Both empty
	// means every local address.
	NodePortAddresses []netip.Prefix
	NodePortPrimary   bool
	NodePortDefaulted bool
	// LocalhostRelayOff: the KubeProxyNFTablesLocalhostNodePorts gate was
	// set to false, so no localhost NodePort relay runs.
	LocalhostRelayOff bool

	// MetricsBindAddress and HealthzBindAddress are "IP:port" strings
	// accepted by net.Listen; "" disables the server.
	MetricsBindAddress string
	HealthzBindAddress string

	IPTables IPTablesOptions
	IPVS     IPVSOptions
	// UDPIdleTimeout is how long the userspace proxy keeps an idle UDP
	// session.
	UDPIdleTimeout time.Duration
	// UDPMaxSessions caps each userspace UDP proxy socket's sessions
	// (--userspace-udp-max-sessions); 0 means no cap.
	UDPMaxSessions int
	// UserspaceTransparent: the userspace proxy connects to local
	// endpoints of externalTrafficPolicy Local services from the
	// client's address (--userspace-transparent).
	UserspaceTransparent bool
	// UserspaceFallback: userspace mode's sentinels and kernel fallback
	// across restarts (--userspace-restart-fallback).
	UserspaceFallback bool
	// ResetVanished ends the TCP flows of endpoints that left every
	// EndpointSlice, VanishedGrace after they left
	// (--reset-vanished-endpoint-connections; conntrack.VanishedReaper).
	ResetVanished bool
	VanishedGrace time.Duration
	// ServiceTraffic counts every Service port's traffic in the data plane
	// and exports it (--service-traffic-metrics,
	// docs/service-traffic-metrics.md).
	ServiceTraffic bool
	// EnableProfiling serves net/http/pprof on the metrics server.
	EnableProfiling bool
	// Conntrack is the conntrack tuning applied at start (--conntrack-*).
	Conntrack conntrack.Tuning
	// LocalhostNodePorts lets IPv4 NodePorts answer on 127.0.0.0/8 in
	// iptables mode (--iptables-localhost-nodeports).
	LocalhostNodePorts bool
	// FeatureGates holds kube-proxy's feature gates as set by
	// --feature-gates / featureGates.
	FeatureGates featuregate.FeatureGate
	// Logging is the merged logging configuration (file section, then
	// flags), applied by NewCommand before the run function.
	Logging *logsapi.LoggingConfiguration
	// BindAddress is --bind-address (invalid or unspecified: not set); it
	// decides the primary IP family.
	BindAddress netip.Addr
	// BindAddressHardFail makes a healthz/metrics serving failure fatal.
	BindAddressHardFail bool
	// OOMScoreAdj is written to /proc/self/oom_score_adj at start.
	OOMScoreAdj int
}

// IPTablesOptions holds the iptables-mode sync periods.
type IPTablesOptions struct {
	SyncPeriod    time.Duration
	MinSyncPeriod time.Duration
}

// IPVSOptions holds the ipvs-mode settings.
type IPVSOptions struct {
	SyncPeriod    time.Duration
	MinSyncPeriod time.Duration
	// Scheduler is an IPVS scheduler name (rr, lc, dh, sh, wrr, wlc, sed,
	// nq, mh).
	Scheduler string
	// TCPTimeout, TCPFinTimeout and UDPTimeout are IPVS connection
	// timeouts; 0 leaves the kernel's value alone.
	TCPTimeout    time.Duration
	TCPFinTimeout time.Duration
	UDPTimeout    time.Duration
	// StrictARP sets arp_ignore=1/arp_announce=2 so the node does not
	// answer ARP for service IPs bound to kube-ipvs0.
	StrictARP bool
	// ExcludeCIDRs are left alone by the IPVS cleanup.
	ExcludeCIDRs []netip.Prefix
}

// SyncPeriods returns the minimum and maximum sync intervals of the
// selected mode. The userspace mode uses the iptables periods, as upstream's
// userspace proxier did.
func (o *Options) SyncPeriods() (minPeriod, maxPeriod time.Duration) {
	return specOf(o.Mode).syncPeriods(o)
}
