package app

import (
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// writeConfigTo is --write-config-to: the configuration the daemon would
// run with (defaults, file, flags merged) written as a
// KubeProxyConfiguration file that --config reads back to the same
// settings.
func writeConfigTo(path string, r *rawConfig, fs *pflag.FlagSet) error {
	data, err := yaml.Marshal(r.effectiveConfig(fs))
	if err != nil {
		return fmt.Errorf("encoding the configuration: %w", err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--write-config-to: %w", err)
	}
	return nil
}

// effectiveConfig maps every setting with a file field back to it.
func (r *rawConfig) effectiveConfig(fs *pflag.FlagSet) *fileConfig {
	k := kubeproxyv1alpha1.KubeProxyConfiguration{
		Mode:             kubeproxyv1alpha1.ProxyMode(r.Mode),
		ConfigSyncPeriod: duration(r.ConfigSyncPeriod),
		HostnameOverride: r.HostnameOverride,
		ClusterCIDR:      r.ClusterCIDR,
		DetectLocalMode:  kubeproxyv1alpha1.LocalMode(r.DetectLocalMode),
		DetectLocal: kubeproxyv1alpha1.DetectLocalConfiguration{
			BridgeInterface: r.PodBridgeInterface, InterfaceNamePrefix: r.PodInterfaceNamePrefix,
		},
		NodePortAddresses:           r.NodePortAddresses,
		MetricsBindAddress:          r.MetricsBindAddress,
		HealthzBindAddress:          r.HealthzBindAddress,
		EnableProfiling:             r.EnableProfiling,
		OOMScoreAdj:                 ptr(r.OOMScoreAdj),
		FeatureGates:                r.FeatureGates,
		BindAddress:                 r.BindAddress,
		BindAddressHardFail:         r.BindAddressHardFail,
		ShowHiddenMetricsForVersion: r.ShowHiddenMetrics,
	}
	k.APIVersion, k.Kind = configAPIVersion, configKind
	k.ClientConnection.Kubeconfig = r.Kubeconfig
	k.ClientConnection.QPS = r.KubeAPIQPS
	k.ClientConnection.Burst = r.KubeAPIBurst
	k.ClientConnection.ContentType = r.KubeAPIContentType
	k.ClientConnection.AcceptContentTypes = r.AcceptContentTypes
	k.IPTables = kubeproxyv1alpha1.KubeProxyIPTablesConfiguration{
		MasqueradeAll: r.MasqueradeAll, MasqueradeBit: ptr(r.MasqueradeBit),
		SyncPeriod: duration(r.IPTablesSyncPeriod), MinSyncPeriod: duration(r.IPTablesMinSyncPeriod),
		LocalhostNodePorts: ptr(r.IPTablesLocalhostNodePorts),
	}
	if flagSection(r.Mode) == "nftables" {
		// The nftables section wins in nftables mode (applyNFTablesSection).
		k.NFTables = kubeproxyv1alpha1.KubeProxyNFTablesConfiguration{
			MasqueradeAll: r.MasqueradeAll, MasqueradeBit: ptr(r.MasqueradeBit),
			SyncPeriod: duration(r.IPTablesSyncPeriod), MinSyncPeriod: duration(r.IPTablesMinSyncPeriod),
		}
	}
	k.IPVS = r.ipvsSection()
	k.Conntrack = kubeproxyv1alpha1.KubeProxyConntrackConfiguration{
		MaxPerCore: ptr(r.ConntrackMaxPerCore), Min: ptr(r.ConntrackMin),
		TCPEstablishedTimeout: ptr(duration(r.ConntrackTCPEstablished)),
		TCPCloseWaitTimeout:   ptr(duration(r.ConntrackTCPCloseWait)),
		TCPBeLiberal:          r.ConntrackTCPBeLiberal,
		UDPTimeout:            duration(r.ConntrackUDPTimeout), UDPStreamTimeout: duration(r.ConntrackUDPTimeoutStream),
	}
	if r.Logging != nil {
		k.Logging = *r.Logging
	}
	out := &fileConfig{KubeProxyConfiguration: k}
	if flagOwner("udp-timeout") == Mode(r.Mode) || r.UDPIdleTimeout != defaultRawConfig().UDPIdleTimeout {
		out.UDPIdleTimeout = duration(r.UDPIdleTimeout)
	}
	return out
}

// ipvsSection is the ipvs settings in ipvs mode, and in the other modes
// only when one differs from its default: switchyard warns about
// settings of another mode, and kubeadm-style defaults should not warn.
func (r *rawConfig) ipvsSection() kubeproxyv1alpha1.KubeProxyIPVSConfiguration {
	section := func(c *rawConfig) kubeproxyv1alpha1.KubeProxyIPVSConfiguration {
		return kubeproxyv1alpha1.KubeProxyIPVSConfiguration{
			Scheduler: c.IPVSScheduler, SyncPeriod: duration(c.IPVSSyncPeriod), MinSyncPeriod: duration(c.IPVSMinSyncPeriod),
			TCPTimeout: duration(c.IPVSTCPTimeout), TCPFinTimeout: duration(c.IPVSTCPFinTimeout),
			UDPTimeout: duration(c.IPVSUDPTimeout), StrictARP: c.IPVSStrictARP,
			ExcludeCIDRs: c.IPVSExcludeCIDRs,
		}
	}
	mine := section(r)
	if flagSection(r.Mode) != "ipvs" && reflect.DeepEqual(mine, section(defaultRawConfig())) {
		return kubeproxyv1alpha1.KubeProxyIPVSConfiguration{}
	}
	return mine
}

func duration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

func ptr[T any](v T) *T { return &v }
