package app

import (
	"fmt"
	"reflect"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// Upstream kube-proxy defaults (pkg/proxy/apis/config/v1alpha1/defaults.go
// and the userspace proxier's --udp-timeout).
const (
	defaultMetricsPort = 10249
	defaultHealthzPort = 10256
)

// rawConfig is the configuration before parsing: one field per setting, in
// the form a flag holds it. The command binds flags to one rawConfig and
// merges defaults, file and changed flags into another.
type rawConfig struct {
	ConfigFile           string
	Cleanup              bool
	CleanupAfterRollback bool
	InitOnly             bool
	WriteConfigTo        string
	FeatureGates         map[string]bool
	BindAddress          string
	BindAddressHardFail  bool
	ShowHiddenMetrics    string
	// AcceptContentTypes is clientConnection.acceptContentTypes (no flag).
	AcceptContentTypes string
	Mode               string
	Kubeconfig         string
	Master             string
	KubeAPIQPS         float32
	KubeAPIBurst       int32
	KubeAPIContentType string
	ConfigSyncPeriod   time.Duration
	HostnameOverride   string
	ServiceProxyName   string
	ClusterCIDR        string
	// DetectLocalMode, PodBridgeInterface and PodInterfaceNamePrefix are
	// kube-proxy's local-traffic detection (--detect-local-mode,
	// --pod-bridge-interface, --pod-interface-name-prefix).
	DetectLocalMode        string
	PodBridgeInterface     string
	PodInterfaceNamePrefix string
	MasqueradeAll          bool
	MasqueradeBit          int32
	// MasqueradeTCPKeepPort: --masquerade-tcp-keep-port.
	MasqueradeTCPKeepPort bool
	NodePortAddresses     []string
	MetricsBindAddress    string
	HealthzBindAddress    string
	IPTablesSyncPeriod    time.Duration
	IPTablesMinSyncPeriod time.Duration
	IPVSScheduler         string
	IPVSSyncPeriod        time.Duration
	IPVSMinSyncPeriod     time.Duration
	IPVSTCPTimeout        time.Duration
	IPVSTCPFinTimeout     time.Duration
	IPVSUDPTimeout        time.Duration
	IPVSStrictARP         bool
	IPVSExcludeCIDRs      []string
	UDPIdleTimeout        time.Duration
	UserspaceUDPSessions  int
	UserspaceTransparent  bool
	UserspaceFallback     bool
	EnableProfiling       bool
	// ResetVanished and VanishedGrace: --reset-vanished-endpoint-connections
	// and its grace period (conntrack.VanishedReaper).
	ResetVanished bool
	VanishedGrace time.Duration
	// ServiceTraffic: --service-traffic-metrics.
	ServiceTraffic bool

	ConntrackMaxPerCore        int32
	ConntrackMin               int32
	ConntrackTCPEstablished    time.Duration
	ConntrackTCPCloseWait      time.Duration
	ConntrackTCPBeLiberal      bool
	ConntrackUDPTimeout        time.Duration
	ConntrackUDPTimeoutStream  time.Duration
	IPTablesLocalhostNodePorts bool
	OOMScoreAdj                int32

	// Logging is the file's logging section until complete() merges the
	// logging flags into it (nil: no file, or no section).
	Logging *logsapi.LoggingConfiguration
	// fromFile records, by flag name, which values the config file set, so
	// errors name the field the operator actually wrote.
	fromFile map[string]bool
}

func defaultRawConfig() *rawConfig {
	return &rawConfig{
		Mode:               string(defaultMode),
		KubeAPIQPS:         5,
		KubeAPIBurst:       10,
		KubeAPIContentType: "application/vnd.kubernetes.protobuf",
		ConfigSyncPeriod:   15 * time.Minute,
		MasqueradeBit:      14,
		MetricsBindAddress: fmt.Sprintf("127.0.0.1:%d", defaultMetricsPort),
		HealthzBindAddress: fmt.Sprintf("0.0.0.0:%d", defaultHealthzPort),
		IPTablesSyncPeriod: 30 * time.Second,
		IPVSScheduler:      "rr",
		IPVSSyncPeriod:     30 * time.Second,
		UDPIdleTimeout:     250 * time.Millisecond,
		// userspace.DefaultUDPMaxSessions; kube-proxy has no such cap.
		UserspaceUDPSessions: 1024,
		UserspaceTransparent: true,
		VanishedGrace:        10 * time.Second, // conntrack.DefaultVanishedGrace
		// KubeProxyConntrackConfiguration's defaults.
		ConntrackMaxPerCore:        32768,
		ConntrackMin:               131072,
		ConntrackTCPEstablished:    24 * time.Hour,
		ConntrackTCPCloseWait:      time.Hour,
		IPTablesLocalhostNodePorts: true,
		OOMScoreAdj:                -999, // qos.KubeProxyOOMScoreAdj
		BindAddress:                "0.0.0.0",
		fromFile:                   map[string]bool{},
	}
}

// setting ties a flag to its KubeProxyConfiguration field path ("" for
// flag-only settings) and to the rawConfig field both fill.
type setting struct {
	flag, field, goField string
}

func settings() []setting {
	return []setting{
		{"config", "", "ConfigFile"},
		{"cleanup", "", "Cleanup"},
		{"cleanup-after-rollback", "", "CleanupAfterRollback"},
		{"init-only", "", "InitOnly"},
		{"write-config-to", "", "WriteConfigTo"},
		{"feature-gates", "featureGates", "FeatureGates"},
		{"bind-address", "bindAddress", "BindAddress"},
		{"bind-address-hard-fail", "bindAddressHardFail", "BindAddressHardFail"},
		{"show-hidden-metrics-for-version", "showHiddenMetricsForVersion", "ShowHiddenMetrics"},
		{"proxy-mode", "mode", "Mode"},
		{"kubeconfig", "clientConnection.kubeconfig", "Kubeconfig"},
		{"master", "", "Master"},
		{"kube-api-qps", "clientConnection.qps", "KubeAPIQPS"},
		{"kube-api-burst", "clientConnection.burst", "KubeAPIBurst"},
		{"kube-api-content-type", "clientConnection.contentType", "KubeAPIContentType"},
		{"config-sync-period", "configSyncPeriod", "ConfigSyncPeriod"},
		{"hostname-override", "hostnameOverride", "HostnameOverride"},
		{"service-proxy-name", "", "ServiceProxyName"},
		{"cluster-cidr", "clusterCIDR", "ClusterCIDR"},
		{"detect-local-mode", "detectLocalMode", "DetectLocalMode"},
		{"pod-bridge-interface", "detectLocal.bridgeInterface", "PodBridgeInterface"},
		{"pod-interface-name-prefix", "detectLocal.interfaceNamePrefix", "PodInterfaceNamePrefix"},
		{"masquerade-all", "iptables.masqueradeAll", "MasqueradeAll"},
		{"iptables-masquerade-bit", "iptables.masqueradeBit", "MasqueradeBit"},
		{"masquerade-tcp-keep-port", "", "MasqueradeTCPKeepPort"},
		{"nodeport-addresses", "nodePortAddresses", "NodePortAddresses"},
		{"metrics-bind-address", "metricsBindAddress", "MetricsBindAddress"},
		{"healthz-bind-address", "healthzBindAddress", "HealthzBindAddress"},
		{"iptables-sync-period", "iptables.syncPeriod", "IPTablesSyncPeriod"},
		{"iptables-min-sync-period", "iptables.minSyncPeriod", "IPTablesMinSyncPeriod"},
		{"ipvs-scheduler", "ipvs.scheduler", "IPVSScheduler"},
		{"ipvs-sync-period", "ipvs.syncPeriod", "IPVSSyncPeriod"},
		{"ipvs-min-sync-period", "ipvs.minSyncPeriod", "IPVSMinSyncPeriod"},
		{"ipvs-tcp-timeout", "ipvs.tcpTimeout", "IPVSTCPTimeout"},
		{"ipvs-tcpfin-timeout", "ipvs.tcpFinTimeout", "IPVSTCPFinTimeout"},
		{"ipvs-udp-timeout", "ipvs.udpTimeout", "IPVSUDPTimeout"},
		{"ipvs-strict-arp", "ipvs.strictARP", "IPVSStrictARP"},
		{"ipvs-exclude-cidrs", "ipvs.excludeCIDRs", "IPVSExcludeCIDRs"},
		{"udp-timeout", "udpIdleTimeout", "UDPIdleTimeout"},
		{"userspace-udp-max-sessions", "", "UserspaceUDPSessions"},
		{"userspace-transparent", "", "UserspaceTransparent"},
		{"userspace-restart-fallback", "", "UserspaceFallback"},
		{"profiling", "enableProfiling", "EnableProfiling"},
		{"reset-vanished-endpoint-connections", "", "ResetVanished"},
		{"vanished-endpoint-grace-period", "", "VanishedGrace"},
		{"service-traffic-metrics", "", "ServiceTraffic"},
		{"conntrack-max-per-core", "conntrack.maxPerCore", "ConntrackMaxPerCore"},
		{"conntrack-min", "conntrack.min", "ConntrackMin"},
		{"conntrack-tcp-timeout-established", "conntrack.tcpEstablishedTimeout", "ConntrackTCPEstablished"},
		{"conntrack-tcp-timeout-close-wait", "conntrack.tcpCloseWaitTimeout", "ConntrackTCPCloseWait"},
		{"conntrack-tcp-be-liberal", "conntrack.tcpBeLiberal", "ConntrackTCPBeLiberal"},
		{"conntrack-udp-timeout", "conntrack.udpTimeout", "ConntrackUDPTimeout"},
		{"conntrack-udp-timeout-stream", "conntrack.udpStreamTimeout", "ConntrackUDPTimeoutStream"},
		{"iptables-localhost-nodeports", "iptables.localhostNodePorts", "IPTablesLocalhostNodePorts"},
		{"oom-score-adj", "oomScoreAdj", "OOMScoreAdj"},
	}
}

// addFlags registers every setting's flag, bound to r, with r's values as
// the defaults shown by --help.
func (r *rawConfig) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&r.ConfigFile, "config", r.ConfigFile, "Path to a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) file. Flags given on the command line override its values.")
	fs.BoolVar(&r.Cleanup, "cleanup", r.Cleanup, "Remove the rules this proxy programmed (iptables, IPVS, userspace) and exit.")
	fs.BoolVar(&r.CleanupAfterRollback, "cleanup-after-rollback", r.CleanupAfterRollback, "After kube-proxy's nftables mode took the node over from switchyard's: remove the chains and sets switchyard left in kube-proxy's table (no hook reaches them any more), nothing of kube-proxy's, and exit.")
	fs.Var(cliflag.NewMapStringBool(&r.FeatureGates), "feature-gates", featureGatesHelp())
	fs.StringVar(&r.BindAddress, "bind-address", r.BindAddress, "Overrides switchyard's idea of what its node's primary IP is (its family becomes the primary family). As in kube-proxy, the name is a historical artifact: no socket is bound to this IP.")
	fs.BoolVar(&r.BindAddressHardFail, "bind-address-hard-fail", r.BindAddressHardFail, "If true, a failure to serve the healthz or metrics port is fatal; otherwise it is logged and retried every 5s.")
	fs.StringVar(&r.ShowHiddenMetrics, "show-hidden-metrics-for-version", r.ShowHiddenMetrics, "The previous version for which you want to show hidden metrics. Only the previous minor version (1.36) is accepted, as by kube-proxy v1.37; switchyard hides no metric, so it shows nothing more.")
	fs.StringVar(&r.WriteConfigTo, "write-config-to", r.WriteConfigTo, "If set, write the configuration switchyard would run with (defaults, --config file and flags merged) to this file as a KubeProxyConfiguration and exit.")
	fs.BoolVar(&r.InitOnly, "init-only", r.InitOnly, "If true, perform any initialization steps that must be done with full root privileges (the conntrack sysctls, route_localnet), and then exit. After doing this, you can run switchyard again with only the CAP_NET_ADMIN and CAP_NET_RAW capabilities.")
	fs.StringVar(&r.Mode, "proxy-mode", r.Mode, "Which proxy mode to use: 'iptables', 'ipvs', 'nftables' or 'userspace'.")
	fs.StringVar(&r.Kubeconfig, "kubeconfig", r.Kubeconfig, "Path to a kubeconfig file with authorization information (in-cluster configuration when empty).")
	fs.StringVar(&r.Master, "master", r.Master, "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.Float32Var(&r.KubeAPIQPS, "kube-api-qps", r.KubeAPIQPS, "QPS to use while talking with the Kubernetes API server.")
	fs.Int32Var(&r.KubeAPIBurst, "kube-api-burst", r.KubeAPIBurst, "Burst to use while talking with the Kubernetes API server.")
	fs.StringVar(&r.KubeAPIContentType, "kube-api-content-type", r.KubeAPIContentType, "Content type of requests sent to the API server.")
	fs.DurationVar(&r.ConfigSyncPeriod, "config-sync-period", r.ConfigSyncPeriod, "How often configuration from the API server is refreshed. Must be greater than 0.")
	fs.StringVar(&r.HostnameOverride, "hostname-override", r.HostnameOverride, "If non-empty, will be used as the name of the Node that this proxy runs on instead of the actual hostname.")
	fs.StringVar(&r.ServiceProxyName, "service-proxy-name", r.ServiceProxyName, "If non-empty, handle only Services labelled service.kubernetes.io/service-proxy-name=<this value>; otherwise handle Services without that label.")
	fs.StringVar(&r.ClusterCIDR, "cluster-cidr", r.ClusterCIDR, "The CIDR range of the pods in the cluster (comma-separated, one per IP family). When --detect-local-mode is ClusterCIDR, traffic from this range is local: traffic to service IPs from outside it is masqueraded.")
	fs.StringVar(&r.DetectLocalMode, "detect-local-mode", r.DetectLocalMode, "Mode to use to detect local traffic: ClusterCIDR (source in --cluster-cidr; the default), NodeCIDR (source in the Node's spec.podCIDRs), BridgeInterface (in on --pod-bridge-interface) or InterfaceNamePrefix (in on an interface named --pod-interface-name-prefix*).")
	fs.StringVar(&r.PodBridgeInterface, "pod-bridge-interface", r.PodBridgeInterface, "A bridge interface name. When --detect-local-mode is set to BridgeInterface, switchyard will consider traffic to be local if it originates from this bridge.")
	fs.StringVar(&r.PodInterfaceNamePrefix, "pod-interface-name-prefix", r.PodInterfaceNamePrefix, "An interface name prefix. When --detect-local-mode is set to InterfaceNamePrefix, switchyard will consider traffic to be local if it originates from any interface whose name begins with this prefix.")
	fs.BoolVar(&r.MasqueradeAll, "masquerade-all", r.MasqueradeAll, "SNAT all traffic sent via Service cluster IPs.")
	fs.Int32Var(&r.MasqueradeBit, "iptables-masquerade-bit", r.MasqueradeBit, "The bit of the fwmark space to mark packets requiring SNAT with. Must be within [0, 31].")
	fs.BoolVar(&r.MasqueradeTCPKeepPort, "masquerade-tcp-keep-port", r.MasqueradeTCPKeepPort, "iptables and nftables modes: masquerade TCP keeping the client's source port where it is free, instead of a random port for every connection (--random-fully, fully-random, as kube-proxy does and the default). With random ports, on kernels whose TCP timestamp offsets depend on the ports, a share of new connections to endpoints that close first meets a TIME_WAIT socket of another client port, is refused by its PAWS check and connects only after a reset and a SYN retransmit (~10 ms, sometimes 1 s); random ports make two simultaneous connections from the same client port less likely to clash in the NAT. UDP and SCTP are always masqueraded with random ports. See docs/performance.md.")
	fs.StringSliceVar(&r.NodePortAddresses, "nodeport-addresses", r.NodePortAddresses, "A list of CIDR ranges that contain valid node IPs, and any of the keywords 'primary' (the node's primary IP of each family), 'localhost' (127.0.0.0/8 and ::1/128) and 'all' (0.0.0.0/0 and ::/0), combined freely. NodePort connections are accepted only on local IPs in these ranges. Unset means all local IPs, except in nftables mode, where it means 'primary' and 127.0.0.1/32. Loopback is served by route_localnet in iptables mode (IPv4) and, for TCP, by a userspace relay in nftables mode and for IPv6 in iptables mode.")
	fs.StringVar(&r.MetricsBindAddress, "metrics-bind-address", r.MetricsBindAddress, "The IP:port for the metrics server to serve on (a bare IP gets port 10249). Set empty to disable.")
	fs.StringVar(&r.HealthzBindAddress, "healthz-bind-address", r.HealthzBindAddress, "The IP:port for the health check server to serve on (a bare IP gets port 10256). Set empty to disable.")
	fs.DurationVar(&r.IPTablesSyncPeriod, "iptables-sync-period", r.IPTablesSyncPeriod, "The maximum interval of how often iptables rules are refreshed (e.g. '5s', '1m'). Must be greater than 0.")
	fs.DurationVar(&r.IPTablesMinSyncPeriod, "iptables-min-sync-period", r.IPTablesMinSyncPeriod, "A floor on the interval between iptables rule resyncs as endpoints and services change (e.g. '1s'). Unset, syncs are paced by their cost: a change after a quiet spell syncs at once, and syncs take at most 42% of one core.")
	fs.StringVar(&r.IPVSScheduler, "ipvs-scheduler", r.IPVSScheduler, "The IPVS scheduler: rr, lc, dh, sh, wrr, wlc, sed, nq or mh.")
	fs.DurationVar(&r.IPVSSyncPeriod, "ipvs-sync-period", r.IPVSSyncPeriod, "The maximum interval of how often IPVS rules are refreshed (e.g. '5s', '1m'). Must be greater than 0.")
	fs.DurationVar(&r.IPVSMinSyncPeriod, "ipvs-min-sync-period", r.IPVSMinSyncPeriod, "A floor on the interval between IPVS rule resyncs as endpoints and services change (e.g. '1s'). Unset, syncs are paced by their cost, as for iptables.")
	fs.DurationVar(&r.IPVSTCPTimeout, "ipvs-tcp-timeout", r.IPVSTCPTimeout, "The timeout for idle IPVS TCP connections; 0 leaves the kernel value as it is.")
	fs.DurationVar(&r.IPVSTCPFinTimeout, "ipvs-tcpfin-timeout", r.IPVSTCPFinTimeout, "The timeout for IPVS TCP connections after receiving a FIN packet; 0 leaves the kernel value as it is.")
	fs.DurationVar(&r.IPVSUDPTimeout, "ipvs-udp-timeout", r.IPVSUDPTimeout, "The timeout for IPVS UDP packets; 0 leaves the kernel value as it is.")
	fs.StringSliceVar(&r.IPVSExcludeCIDRs, "ipvs-exclude-cidrs", r.IPVSExcludeCIDRs, "A comma-separated list of CIDRs which the ipvs proxier should not touch when cleaning up IPVS rules (virtual servers and kube-ipvs0 addresses on them are left alone, also by --cleanup).")
	fs.BoolVar(&r.IPVSStrictARP, "ipvs-strict-arp", r.IPVSStrictARP, "Enable strict ARP by setting arp_ignore to 1 and arp_announce to 2.")
	fs.DurationVar(&r.UDPIdleTimeout, "udp-timeout", r.UDPIdleTimeout, "How long an idle UDP connection is kept open in userspace mode (e.g. '250ms', '2s'). Must be greater than 0.")
	fs.IntVar(&r.UserspaceUDPSessions, "userspace-udp-max-sessions", r.UserspaceUDPSessions, "Userspace mode: the most UDP sessions (client address:port pairs) one service port's proxy socket keeps at a time; datagrams from further clients are dropped and counted. 0 means no cap.")
	fs.BoolVar(&r.UserspaceTransparent, "userspace-transparent", r.UserspaceTransparent, "In userspace mode, connect to the local endpoints of services with externalTrafficPolicy Local from the client's own address (IP_TRANSPARENT and policy routing), so that they see the client as in the kernel modes.")
	fs.BoolVar(&r.ResetVanished, "reset-vanished-endpoint-connections", r.ResetVanished, "Once an endpoint has left every EndpointSlice for --vanished-endpoint-grace-period (its pod deleted, its node gone), end the TCP connections made to it through a Service (iptables and nftables modes: their conntrack entries are deleted, so the client's next packet is answered with a reset; userspace relays: the connections are aborted), instead of letting them hang until the clients' own timeouts. ipvs mode: the draining real server is deleted at once, and expire_nodest_conn expires its connections at their next packet. Endpoints still listed (terminating ones included) are never touched.")
	fs.DurationVar(&r.VanishedGrace, "vanished-endpoint-grace-period", r.VanishedGrace, "How long an endpoint must be out of every EndpointSlice before --reset-vanished-endpoint-connections ends its connections. Must be greater than 0.")
	fs.BoolVar(&r.ServiceTraffic, "service-traffic-metrics", r.ServiceTraffic, "Count each Service port's new connections, packets and bytes in the data plane (every mode) and export them as switchyard_service_{connections,packets,bytes}_total, read at scrape time. Series: service ports x IP families x 3. See docs/service-traffic-metrics.md for what each mode counts and what it costs.")
	fs.BoolVar(&r.UserspaceFallback, "userspace-restart-fallback", r.UserspaceFallback, "In userspace mode, keep service traffic flowing while the daemon restarts: a sentinel socket on each service address and port tells a running proxy apart, and traffic no proxy takes is DNATed straight to the endpoints. The sentinels hold the services' ports on the node: a host process (a hostNetwork pod) can then not bind that port on every address (e.g. :80 while a Service has port 80). Off, a graceful stop (SIGTERM) still hands the traffic to the kernel until the next start; after a SIGKILL connections are refused until the new daemon's first sync.")
	fs.BoolVar(&r.EnableProfiling, "profiling", r.EnableProfiling, "If true, serve Go profiling data on the metrics server under /debug/pprof/.")
	fs.Int32Var(&r.OOMScoreAdj, "oom-score-adj", r.OOMScoreAdj, "The oom-score-adj value for the switchyard process. Values must be within the range [-1000, 1000].")
	r.addNodeSetupFlags(fs)
}

// addNodeSetupFlags registers the settings applied once at start: the
// conntrack tuning and localhost NodePorts (route_localnet).
func (r *rawConfig) addNodeSetupFlags(fs *pflag.FlagSet) {
	fs.Int32Var(&r.ConntrackMaxPerCore, "conntrack-max-per-core", r.ConntrackMaxPerCore, "Maximum number of NAT connections to track per CPU core (0 to leave the limit as-is and ignore conntrack-min). nf_conntrack_max is only ever raised.")
	fs.Int32Var(&r.ConntrackMin, "conntrack-min", r.ConntrackMin, "Minimum number of conntrack entries to allocate, regardless of conntrack-max-per-core (set conntrack-max-per-core=0 to leave the limit as-is).")
	fs.DurationVar(&r.ConntrackTCPEstablished, "conntrack-tcp-timeout-established", r.ConntrackTCPEstablished, "Idle timeout for established TCP connections (0 to leave as-is).")
	fs.DurationVar(&r.ConntrackTCPCloseWait, "conntrack-tcp-timeout-close-wait", r.ConntrackTCPCloseWait, "NAT timeout for TCP connections in the CLOSE_WAIT state (0 to leave as-is).")
	fs.BoolVar(&r.ConntrackTCPBeLiberal, "conntrack-tcp-be-liberal", r.ConntrackTCPBeLiberal, "Enable liberal mode for tracking TCP packets by setting nf_conntrack_tcp_be_liberal to 1.")
	fs.DurationVar(&r.ConntrackUDPTimeout, "conntrack-udp-timeout", r.ConntrackUDPTimeout, "Idle timeout for UNREPLIED UDP connections (0 to leave as-is).")
	fs.DurationVar(&r.ConntrackUDPTimeoutStream, "conntrack-udp-timeout-stream", r.ConntrackUDPTimeoutStream, "Idle timeout for ASSURED UDP connections (0 to leave as-is).")
	fs.BoolVar(&r.IPTablesLocalhostNodePorts, "iptables-localhost-nodeports", r.IPTablesLocalhostNodePorts, "If false, disable the legacy behavior of allowing NodePort services to be accessed via localhost. (Applies only to iptables mode and IPv4; it sets net.ipv4.conf.all.route_localnet=1. Localhost NodePorts are never allowed with the nftables and ipvs modes or with IPv6.)")
}

// applyChangedFlags copies into r every setting whose flag was given on the
// command line, overriding defaults and file values.
func (r *rawConfig) applyChangedFlags(fs *pflag.FlagSet, flags *rawConfig) {
	dst := reflect.ValueOf(r).Elem()
	src := reflect.ValueOf(flags).Elem()
	for _, s := range settings() {
		if !fs.Changed(s.flag) {
			continue
		}
		dst.FieldByName(s.goField).Set(src.FieldByName(s.goField))
		delete(r.fromFile, s.flag)
	}
}

// name is how errors and warnings refer to a setting: the config file field
// when the file supplied the value, otherwise the flag.
func (r *rawConfig) name(flag string) string {
	if r.fromFile[flag] {
		for _, s := range settings() {
			if s.flag == flag {
				return s.field
			}
		}
	}
	return "--" + flag
}
