package app

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/switchyard-proxy/switchyard/conntrack"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// ipvsSchedulers are the IPVS schedulers switchyard accepts.
func ipvsSchedulers() []string {
	return []string{"rr", "lc", "dh", "sh", "wrr", "wlc", "sed", "nq", "mh"}
}

// validator collects every problem so the operator sees them all at once.
type validator struct {
	raw  *rawConfig
	errs []error
}

// fail records `invalid <setting> "<value>": <reason>`.
func (v *validator) fail(flag, value, reason string) {
	v.errs = append(v.errs, fmt.Errorf("invalid %s %q: %s", v.raw.name(flag), value, reason))
}

// options parses and validates the merged configuration.
func (r *rawConfig) options() (*Options, error) {
	v := &validator{raw: r}
	o := &Options{
		ConfigFile:                r.ConfigFile,
		Cleanup:                   r.Cleanup,
		CleanupAfterRollback:      r.CleanupAfterRollback,
		InitOnly:                  r.InitOnly,
		Mode:                      v.mode(),
		Kubeconfig:                r.Kubeconfig,
		Master:                    r.Master,
		KubeAPIQPS:                r.KubeAPIQPS,
		KubeAPIBurst:              int(r.KubeAPIBurst),
		KubeAPIContentType:        r.KubeAPIContentType,
		KubeAPIAcceptContentTypes: r.AcceptContentTypes,
		ConfigSyncPeriod:          r.ConfigSyncPeriod,
		HostnameOverride:          v.hostname(),
		ServiceProxyName:          v.serviceProxyName(),
		ClusterCIDRs:              v.clusterCIDRs(),
		MasqueradeAll:             r.MasqueradeAll,
		MasqueradeBit:             v.masqueradeBit(),
		MasqueradeTCPKeepPort:     r.MasqueradeTCPKeepPort,
		MetricsBindAddress:        v.bindAddress("metrics-bind-address", r.MetricsBindAddress, defaultMetricsPort),
		HealthzBindAddress:        v.bindAddress("healthz-bind-address", r.HealthzBindAddress, defaultHealthzPort),
		IPTables:                  IPTablesOptions{SyncPeriod: r.IPTablesSyncPeriod, MinSyncPeriod: r.IPTablesMinSyncPeriod},
		IPVS: IPVSOptions{
			SyncPeriod: r.IPVSSyncPeriod, MinSyncPeriod: r.IPVSMinSyncPeriod,
			Scheduler:  v.scheduler(),
			TCPTimeout: r.IPVSTCPTimeout, TCPFinTimeout: r.IPVSTCPFinTimeout, UDPTimeout: r.IPVSUDPTimeout,
			StrictARP:    r.IPVSStrictARP,
			ExcludeCIDRs: v.cidrList("ipvs-exclude-cidrs", r.IPVSExcludeCIDRs, ""),
		},
		UDPIdleTimeout:       r.UDPIdleTimeout,
		UDPMaxSessions:       r.UserspaceUDPSessions,
		EnableProfiling:      r.EnableProfiling,
		UserspaceTransparent: r.UserspaceTransparent,
		UserspaceFallback:    r.UserspaceFallback,
		ResetVanished:        r.ResetVanished,
		VanishedGrace:        r.VanishedGrace,
		ServiceTraffic:       r.ServiceTraffic,
		Conntrack: conntrack.Tuning{
			MaxPerCore: int(r.ConntrackMaxPerCore), Min: int(r.ConntrackMin),
			TCPEstablishedTimeout: r.ConntrackTCPEstablished, TCPCloseWaitTimeout: r.ConntrackTCPCloseWait,
			TCPBeLiberal: r.ConntrackTCPBeLiberal,
			UDPTimeout:   r.ConntrackUDPTimeout, UDPStreamTimeout: r.ConntrackUDPTimeoutStream,
		},
		LocalhostNodePorts:  r.IPTablesLocalhostNodePorts,
		OOMScoreAdj:         int(r.OOMScoreAdj),
		BindAddress:         v.bindIP(),
		BindAddressHardFail: r.BindAddressHardFail,
	}
	o.LocalDetector = v.localDetector(o.ClusterCIDRs)
	v.showHiddenMetrics()
	o.NodePortAddresses, o.NodePortPrimary, o.NodePortDefaulted = v.nodePortAddresses(o.Mode)
	o.FeatureGates = v.featureGates(o.Mode)
	if on, set := v.raw.FeatureGates[string(featureNFTablesLocalhostNodePorts)]; set && !on {
		o.LocalhostRelayOff = true
	}
	v.durations()
	v.counts()
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return o, nil
}

func (v *validator) mode() Mode {
	m := Mode(v.raw.Mode)
	if specOf(m) != nil {
		return m
	}
	v.fail("proxy-mode", v.raw.Mode, "must be one of "+modeNames())
	return ""
}

// hostname normalises the override as kube-proxy does (trimmed,
// lower-cased) and requires a valid Node name.
func (v *validator) hostname() string {
	h := strings.ToLower(strings.TrimSpace(v.raw.HostnameOverride))
	if h == "" {
		return ""
	}
	if msgs := validation.IsDNS1123Subdomain(h); len(msgs) > 0 {
		v.fail("hostname-override", v.raw.HostnameOverride, "must be a valid node name: "+strings.Join(msgs, "; "))
	}
	return h
}

func (v *validator) serviceProxyName() string {
	n := v.raw.ServiceProxyName
	if msgs := validation.IsValidLabelValue(n); len(msgs) > 0 {
		v.fail("service-proxy-name", n, "must be a valid label value: "+strings.Join(msgs, "; "))
	}
	return n
}

// clusterCIDRs parses a comma-separated list with at most one prefix per IP
// family (the dual-stack form upstream accepts).
func (v *validator) clusterCIDRs() []netip.Prefix {
	s := strings.TrimSpace(v.raw.ClusterCIDR)
	if s == "" {
		return nil
	}
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			v.fail("cluster-cidr", part, err.Error())
			continue
		}
		for _, prev := range out {
			if prev.Addr().Is4() == p.Addr().Is4() {
				v.fail("cluster-cidr", s, "at most one CIDR per IP family is allowed")
				return nil
			}
		}
		out = append(out, p.Masked())
	}
	return out
}

func (v *validator) masqueradeBit() int {
	b := v.raw.MasqueradeBit
	if b < 0 || b > 31 {
		v.fail("iptables-masquerade-bit", strconv.Itoa(int(b)), "must be within 0..31")
	}
	return int(b)
}

func (v *validator) scheduler() string {
	s := v.raw.IPVSScheduler
	if !slices.Contains(ipvsSchedulers(), s) {
		v.fail("ipvs-scheduler", s, "must be one of "+strings.Join(ipvsSchedulers(), ", "))
	}
	return s
}

// nodePortAddresses parses --nodeport-addresses as kube-proxy v1.37 does:
// CIDRs and the keywords "primary" (the node's primary IPs, resolved once
// they are known: resolveNodePortAddresses), "localhost" (127.0.0.0/8 and
// ::1/128) and "all" (0.0.0.0/0 and ::/0), in any combination, each
// keyword once. Unset in nftables mode means "primary" and 127.0.0.1/32:
// KEP-6032's default, localhost NodePorts on IPv4 through the relay
// (localhostNodePortFamilies); kube-proxy's default there is "primary".
func (v *validator) nodePortAddresses(mode Mode) (prefixes []netip.Prefix, primary, defaulted bool) {
	entries := v.raw.NodePortAddresses
	if s := specOf(mode); len(entries) == 0 && s != nil && s.localhostNodePortDefault {
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, true, true
	}
	seen := map[string]bool{}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if expanded, keyword := nodePortKeywords[e]; keyword {
			if seen[e] {
				v.fail("nodeport-addresses", strings.Join(entries, ","), fmt.Sprintf("duplicate keyword %q", e))
			}
			seen[e] = true
			primary = primary || e == "primary"
			prefixes = append(prefixes, expanded...)
			continue
		}
		p, err := netip.ParsePrefix(e)
		if err != nil {
			v.fail("nodeport-addresses", e, "must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all': "+err.Error())
			continue
		}
		prefixes = append(prefixes, p.Masked())
	}
	return prefixes, primary, false
}

// nodePortKeywords are --nodeport-addresses' keywords and the prefixes
// they stand for ("primary": none until the node's IPs are known).
var nodePortKeywords = map[string][]netip.Prefix{
	"primary":   nil,
	"localhost": {netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	"all":       {netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")},
}

// bindAddress checks an "IP:port" listen address; a bare IP gets the
// default port (as upstream's defaulting does) and "" disables the server.
func (v *validator) bindAddress(flag, addr string, defaultPort int) string {
	if addr == "" {
		return ""
	}
	if ip, err := netip.ParseAddr(strings.Trim(addr, "[]")); err == nil {
		return net.JoinHostPort(ip.String(), strconv.Itoa(defaultPort))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.fail(flag, addr, "must be IP:port: "+err.Error())
		return ""
	}
	if _, err := netip.ParseAddr(host); err != nil {
		v.fail(flag, addr, "must be IP:port: host is not an IP address")
		return ""
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		v.fail(flag, addr, "must be IP:port: port must be within 1..65535")
		return ""
	}
	return addr
}

// durations checks every period and timeout.
func (v *validator) durations() {
	r := v.raw
	v.positive("iptables-sync-period", r.IPTablesSyncPeriod)
	v.positive("ipvs-sync-period", r.IPVSSyncPeriod)
	v.positive("config-sync-period", r.ConfigSyncPeriod)
	v.positive("udp-timeout", r.UDPIdleTimeout)
	v.positive("vanished-endpoint-grace-period", r.VanishedGrace)
	v.nonNegative("iptables-min-sync-period", r.IPTablesMinSyncPeriod)
	v.nonNegative("ipvs-min-sync-period", r.IPVSMinSyncPeriod)
	v.nonNegative("ipvs-tcp-timeout", r.IPVSTCPTimeout)
	v.nonNegative("ipvs-tcpfin-timeout", r.IPVSTCPFinTimeout)
	v.nonNegative("ipvs-udp-timeout", r.IPVSUDPTimeout)
	v.nonNegative("conntrack-tcp-timeout-established", r.ConntrackTCPEstablished)
	v.nonNegative("conntrack-tcp-timeout-close-wait", r.ConntrackTCPCloseWait)
	v.nonNegative("conntrack-udp-timeout", r.ConntrackUDPTimeout)
	v.nonNegative("conntrack-udp-timeout-stream", r.ConntrackUDPTimeoutStream)
	v.notAbove("iptables-min-sync-period", r.IPTablesMinSyncPeriod, "iptables-sync-period", r.IPTablesSyncPeriod)
	v.notAbove("ipvs-min-sync-period", r.IPVSMinSyncPeriod, "ipvs-sync-period", r.IPVSSyncPeriod)
}

func (v *validator) positive(flag string, d time.Duration) {
	if d <= 0 {
		v.fail(flag, d.String(), "must be greater than 0")
	}
}

func (v *validator) nonNegative(flag string, d time.Duration) {
	if d < 0 {
		v.fail(flag, d.String(), "must not be negative")
	}
}

// cidrList parses a list flag of CIDRs (masked); hint starts the reason
// of each error.
func (v *validator) cidrList(flag string, list []string, hint string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			v.fail(flag, s, hint+err.Error())
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// bindIP parses --bind-address (kube-proxy: an IP address, 0.0.0.0 by
// default).
func (v *validator) bindIP() netip.Addr {
	a, err := netip.ParseAddr(strings.TrimSpace(v.raw.BindAddress))
	if err != nil {
		v.fail("bind-address", v.raw.BindAddress, "not a valid textual representation of an IP address")
		return netip.Addr{}
	}
	return a.Unmap()
}

// kubeProxyMinor is the kube-proxy release whose flags and metrics
// switchyard follows.
const kubeProxyMinor = 37

// showHiddenMetrics checks --show-hidden-metrics-for-version as
// component-base does for kube-proxy v1.37: only the previous minor.
func (v *validator) showHiddenMetrics() {
	s := v.raw.ShowHiddenMetrics
	if want := fmt.Sprintf("1.%d", kubeProxyMinor-1); s != "" && s != want {
		v.fail("show-hidden-metrics-for-version", s, fmt.Sprintf("must be omitted or have the value '%s'; only the previous minor version is allowed", want))
	}
}

func (v *validator) nonNegativeInt(flag string, n int32) {
	if n < 0 {
		v.fail(flag, strconv.Itoa(int(n)), "must be greater than or equal to 0")
	}
}

func (v *validator) notAbove(minFlag string, minD time.Duration, maxFlag string, maxD time.Duration) {
	if maxD > 0 && minD > maxD {
		v.fail(minFlag, minD.String(), fmt.Sprintf("must not exceed %s (%s)", v.raw.name(maxFlag), maxD))
	}
}

// localDetector validates local-traffic detection as kube-proxy does: a
// known mode (empty means ClusterCIDR), and a bridge or prefix that is not
// empty in the mode that uses it. Beyond kube-proxy, the name must be one
// Linux could give an interface: iptables and nftables refuse the rules
// otherwise, and every sync would fail.
func (v *validator) localDetector(clusterCIDRs []netip.Prefix) proxier.LocalDetector {
	mode := proxier.LocalMode(v.raw.DetectLocalMode)
	if mode == "" {
		mode = proxier.LocalModeClusterCIDR
	}
	d := proxier.LocalDetector{Mode: mode}
	switch mode {
	case proxier.LocalModeClusterCIDR:
		d.ClusterCIDRs = clusterCIDRs
	case proxier.LocalModeNodeCIDR:
	case proxier.LocalModeBridgeInterface:
		d.Interface = v.interfaceName("pod-bridge-interface", v.raw.PodBridgeInterface, mode, false)
	case proxier.LocalModeInterfaceNamePrefix:
		d.Interface = v.interfaceName("pod-interface-name-prefix", v.raw.PodInterfaceNamePrefix, mode, true)
	default:
		var modes []string
		for _, m := range proxier.LocalModes() {
			modes = append(modes, string(m))
		}
		v.fail("detect-local-mode", v.raw.DetectLocalMode, "must be one of "+strings.Join(modes, ", ")+` or empty (ClusterCIDR)`)
	}
	return d
}

// interfaceName checks the bridge name or interface name prefix the mode
// needs; the error names the setting and the mode that requires it. A
// value missing while the file chose the mode is named by its file field.
func (v *validator) interfaceName(flag, name string, mode proxier.LocalMode, prefix bool) string {
	if err := proxier.ValidateInterfaceName(name, prefix); err != nil {
		setting := v.raw.name(flag)
		if name == "" && v.raw.fromFile["detect-local-mode"] {
			setting = fieldOf(flag)
		}
		v.errs = append(v.errs, fmt.Errorf("invalid %s %q: %v (%s is %s)", setting, name, err, v.raw.name("detect-local-mode"), mode))
	}
	return name
}

// fieldOf is the config file field of a setting's flag.
func fieldOf(flag string) string {
	for _, s := range settings() {
		if s.flag == flag {
			return s.field
		}
	}
	return "--" + flag
}

// counts checks the integer settings that have a range.
func (v *validator) counts() {
	r := v.raw
	if r.UserspaceUDPSessions < 0 {
		v.fail("userspace-udp-max-sessions", strconv.Itoa(r.UserspaceUDPSessions), "must not be negative (0 means no cap)")
	}
	v.nonNegativeInt("conntrack-max-per-core", r.ConntrackMaxPerCore)
	v.nonNegativeInt("conntrack-min", r.ConntrackMin)
	if r.OOMScoreAdj < -1000 || r.OOMScoreAdj > 1000 {
		v.fail("oom-score-adj", strconv.Itoa(int(r.OOMScoreAdj)), "must be within the range [-1000, 1000]")
	}
	if r.KubeAPIBurst < 0 {
		v.fail("kube-api-burst", strconv.Itoa(int(r.KubeAPIBurst)), "must not be negative")
	}
}
