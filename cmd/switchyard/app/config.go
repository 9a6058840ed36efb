package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// fileConfig is what --config decodes: the official KubeProxyConfiguration
// plus udpIdleTimeout, the userspace proxier's field that upstream dropped
// together with the userspace mode.
type fileConfig struct {
	kubeproxyv1alpha1.KubeProxyConfiguration `json:",inline"`
	UDPIdleTimeout                           metav1.Duration `json:"udpIdleTimeout"`
}

const (
	configAPIVersion = "kubeproxy.config.k8s.io/v1alpha1"
	configKind       = "KubeProxyConfiguration"
)

// loadConfigFile reads and decodes a KubeProxyConfiguration file.
func loadConfigFile(path string, warn func(string)) (*fileConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config file: %w", err)
	}
	cfg, err := parseConfig(path, data, warn)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return cfg, nil
}

// parseConfig decodes YAML (or JSON) text. Wrong apiVersion/kind, malformed
// values and duplicate keys are errors; unknown fields and fields switchyard
// does not implement are reported through warn and otherwise ignored.
func parseConfig(path string, data []byte, warn func(string)) (*fileConfig, error) {
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parsing YAML: %w", err)
	}
	var tree map[string]any
	if err := json.Unmarshal(jsonData, &tree); err != nil || tree == nil {
		return nil, errors.New("must be a YAML mapping with apiVersion " + configAPIVersion + " and kind " + configKind)
	}
	if err := checkTypeMeta(tree); err != nil {
		return nil, err
	}
	if err := checkDurations(tree, reflect.TypeFor[fileConfig](), ""); err != nil {
		return nil, err
	}
	cfg := &fileConfig{}
	strictErrs, err := sigsjson.UnmarshalStrict(jsonData, cfg, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	for _, msg := range unknownFieldWarnings(strictErrs) {
		warn(fmt.Sprintf("config file %s: %s", path, msg))
	}
	for _, field := range ignoredFields(&cfg.KubeProxyConfiguration) {
		warn(fmt.Sprintf("config file %s: field %q is not supported by switchyard and is ignored", path, field))
	}
	return cfg, nil
}

// unknownFieldWarnings names each unknown field path, sorted.
func unknownFieldWarnings(strictErrs []error) []string {
	var out []string
	for _, e := range strictErrs {
		var fe sigsjson.FieldError
		if errors.As(e, &fe) {
			out = append(out, fmt.Sprintf("unknown field %q is ignored", fe.FieldPath()))
			continue
		}
		out = append(out, e.Error())
	}
	sort.Strings(out)
	return out
}

func checkTypeMeta(tree map[string]any) error {
	if v := tree["apiVersion"]; v != configAPIVersion {
		return fmt.Errorf("invalid apiVersion %s: must be %s", quoteAny(v), configAPIVersion)
	}
	if v := tree["kind"]; v != configKind {
		return fmt.Errorf("invalid kind %s: must be %s", quoteAny(v), configKind)
	}
	return nil
}

// quoteAny renders a decoded JSON value for an error message; an absent
// value reads as "".
func quoteAny(v any) string {
	if v == nil {
		return `""`
	}
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%v", v)
}

// applyFile copies the file's values into r. As upstream's defaulting does,
// a zero value means "not set" and leaves the default in place.
func (r *rawConfig) applyFile(c *fileConfig) {
	k := &c.KubeProxyConfiguration
	fromFile(r, "proxy-mode", &r.Mode, string(k.Mode))
	fromFile(r, "kubeconfig", &r.Kubeconfig, k.ClientConnection.Kubeconfig)
	fromFile(r, "kube-api-qps", &r.KubeAPIQPS, k.ClientConnection.QPS)
	fromFile(r, "kube-api-burst", &r.KubeAPIBurst, k.ClientConnection.Burst)
	fromFile(r, "kube-api-content-type", &r.KubeAPIContentType, k.ClientConnection.ContentType)
	r.AcceptContentTypes = k.ClientConnection.AcceptContentTypes
	fromFile(r, "config-sync-period", &r.ConfigSyncPeriod, k.ConfigSyncPeriod.Duration)
	fromFile(r, "hostname-override", &r.HostnameOverride, k.HostnameOverride)
	fromFile(r, "cluster-cidr", &r.ClusterCIDR, k.ClusterCIDR)
	fromFile(r, "detect-local-mode", &r.DetectLocalMode, string(k.DetectLocalMode))
	fromFile(r, "pod-bridge-interface", &r.PodBridgeInterface, k.DetectLocal.BridgeInterface)
	fromFile(r, "pod-interface-name-prefix", &r.PodInterfaceNamePrefix, k.DetectLocal.InterfaceNamePrefix)
	fromFile(r, "masquerade-all", &r.MasqueradeAll, k.IPTables.MasqueradeAll)
	if k.IPTables.MasqueradeBit != nil {
		r.MasqueradeBit = *k.IPTables.MasqueradeBit // 0 is a valid bit: nil is "unset"
		r.fromFile["iptables-masquerade-bit"] = true
	}
	if len(k.NodePortAddresses) > 0 {
		r.NodePortAddresses = k.NodePortAddresses
		r.fromFile["nodeport-addresses"] = true
	}
	fromFile(r, "metrics-bind-address", &r.MetricsBindAddress, k.MetricsBindAddress)
	fromFile(r, "healthz-bind-address", &r.HealthzBindAddress, k.HealthzBindAddress)
	fromFile(r, "iptables-sync-period", &r.IPTablesSyncPeriod, k.IPTables.SyncPeriod.Duration)
	fromFile(r, "iptables-min-sync-period", &r.IPTablesMinSyncPeriod, k.IPTables.MinSyncPeriod.Duration)
	r.applyNFTablesSection(k)
	fromFile(r, "ipvs-scheduler", &r.IPVSScheduler, k.IPVS.Scheduler)
	fromFile(r, "ipvs-sync-period", &r.IPVSSyncPeriod, k.IPVS.SyncPeriod.Duration)
	fromFile(r, "ipvs-min-sync-period", &r.IPVSMinSyncPeriod, k.IPVS.MinSyncPeriod.Duration)
	fromFile(r, "ipvs-tcp-timeout", &r.IPVSTCPTimeout, k.IPVS.TCPTimeout.Duration)
	fromFile(r, "ipvs-tcpfin-timeout", &r.IPVSTCPFinTimeout, k.IPVS.TCPFinTimeout.Duration)
	fromFile(r, "ipvs-udp-timeout", &r.IPVSUDPTimeout, k.IPVS.UDPTimeout.Duration)
	fromFile(r, "ipvs-strict-arp", &r.IPVSStrictARP, k.IPVS.StrictARP)
	if len(k.IPVS.ExcludeCIDRs) > 0 {
		r.IPVSExcludeCIDRs = k.IPVS.ExcludeCIDRs
		r.fromFile["ipvs-exclude-cidrs"] = true
	}
	fromFile(r, "udp-timeout", &r.UDPIdleTimeout, c.UDPIdleTimeout.Duration)
	fromFile(r, "profiling", &r.EnableProfiling, k.EnableProfiling)
	r.applyConntrackSection(&k.Conntrack)
	fromFilePtr(r, "iptables-localhost-nodeports", &r.IPTablesLocalhostNodePorts, k.IPTables.LocalhostNodePorts)
	fromFilePtr(r, "oom-score-adj", &r.OOMScoreAdj, k.OOMScoreAdj)
	fromFile(r, "bind-address", &r.BindAddress, k.BindAddress)
	fromFile(r, "bind-address-hard-fail", &r.BindAddressHardFail, k.BindAddressHardFail)
	fromFile(r, "show-hidden-metrics-for-version", &r.ShowHiddenMetrics, k.ShowHiddenMetricsForVersion)
	if len(k.FeatureGates) > 0 {
		r.FeatureGates = k.FeatureGates
		r.fromFile["feature-gates"] = true
	}
	r.Logging = k.Logging.DeepCopy()
}

// fromFile sets *dst to v, and records that the file set it, unless v is the
// zero value.
// applyNFTablesSection takes kube-proxy's "nftables:" settings when the
// file selects nftables mode: they override the iptables section's, as
// the nftables mode has no flags of its own (it reads --masquerade-all,
// --iptables-masquerade-bit and the --iptables-*sync-period flags).
func (r *rawConfig) applyNFTablesSection(k *kubeproxyv1alpha1.KubeProxyConfiguration) {
	if flagSection(string(k.Mode)) != "nftables" {
		return
	}
	fromFile(r, "masquerade-all", &r.MasqueradeAll, k.NFTables.MasqueradeAll)
	if k.NFTables.MasqueradeBit != nil {
		r.MasqueradeBit = *k.NFTables.MasqueradeBit
		r.fromFile["iptables-masquerade-bit"] = true
	}
	fromFile(r, "iptables-sync-period", &r.IPTablesSyncPeriod, k.NFTables.SyncPeriod.Duration)
	fromFile(r, "iptables-min-sync-period", &r.IPTablesMinSyncPeriod, k.NFTables.MinSyncPeriod.Duration)
}

// applyConntrackSection takes the file's conntrack settings. The pointer
// fields keep an explicit 0 ("leave the kernel's value alone").
func (r *rawConfig) applyConntrackSection(c *kubeproxyv1alpha1.KubeProxyConntrackConfiguration) {
	fromFilePtr(r, "conntrack-max-per-core", &r.ConntrackMaxPerCore, c.MaxPerCore)
	fromFilePtr(r, "conntrack-min", &r.ConntrackMin, c.Min)
	fromFilePtr(r, "conntrack-tcp-timeout-established", &r.ConntrackTCPEstablished, durationPtr(c.TCPEstablishedTimeout))
	fromFilePtr(r, "conntrack-tcp-timeout-close-wait", &r.ConntrackTCPCloseWait, durationPtr(c.TCPCloseWaitTimeout))
	fromFile(r, "conntrack-tcp-be-liberal", &r.ConntrackTCPBeLiberal, c.TCPBeLiberal)
	fromFile(r, "conntrack-udp-timeout", &r.ConntrackUDPTimeout, c.UDPTimeout.Duration)
	fromFile(r, "conntrack-udp-timeout-stream", &r.ConntrackUDPTimeoutStream, c.UDPStreamTimeout.Duration)
}

func durationPtr(d *metav1.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	return &d.Duration
}

// fromFilePtr sets *dst to *v, and records that the file set it, unless v
// is nil (the field's zero value is then a real setting).
func fromFilePtr[T any](r *rawConfig, flag string, dst *T, v *T) {
	if v == nil {
		return
	}
	*dst = *v
	r.fromFile[flag] = true
}

func fromFile[T comparable](r *rawConfig, flag string, dst *T, v T) {
	var zero T
	if v == zero {
		return
	}
	*dst = v
	r.fromFile[flag] = true
}
