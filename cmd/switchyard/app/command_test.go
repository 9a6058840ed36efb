package app

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	logsapi "k8s.io/component-base/logs/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/conntrack"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// result is what one execution of the command produced.
type result struct {
	opts     *Options // as handed to the run function; nil if not called
	calls    int
	out      string
	warnings []string
	err      error
}

// execute runs the command with args, a recording run function and a
// recording warning sink.
func execute(t *testing.T, args ...string) result {
	t.Helper()
	var res result
	run := func(_ context.Context, o *Options) error {
		res.calls++
		res.opts = o
		return nil
	}
	cmd := newCommand(run, func(msg string) { res.warnings = append(res.warnings, msg) })
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	res.err = cmd.Execute()
	res.out = out.String()
	if res.err != nil && res.calls != 0 {
		t.Errorf("run was called although the command failed: %v", res.err)
	}
	return res
}

// writeConfig writes a config file into a fresh temp dir and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func defaultOptions() *Options {
	return &Options{
		Mode:               ModeIPTables,
		KubeAPIQPS:         5,
		KubeAPIBurst:       10,
		KubeAPIContentType: "application/vnd.kubernetes.protobuf",
		ConfigSyncPeriod:   15 * time.Minute,
		MasqueradeBit:      14,
		MetricsBindAddress: "127.0.0.1:10249",
		HealthzBindAddress: "0.0.0.0:10256",
		// No minimum sync period: unless one is given (flag or file), the
		// runner paces syncs by their cost.
		IPTables:             IPTablesOptions{SyncPeriod: 30 * time.Second},
		IPVS:                 IPVSOptions{SyncPeriod: 30 * time.Second, Scheduler: "rr"},
		UDPIdleTimeout:       250 * time.Millisecond,
		UDPMaxSessions:       1024,
		UserspaceTransparent: true,
		VanishedGrace:        10 * time.Second,
		Conntrack: conntrack.Tuning{
			MaxPerCore: 32768, Min: 131072, TCPEstablishedTimeout: 24 * time.Hour, TCPCloseWaitTimeout: time.Hour,
		},
		LocalhostNodePorts: true,
		OOMScoreAdj:        -999,
		BindAddress:        netip.IPv4Unspecified(),
		// kube-proxy's default detectLocalMode, here without a cluster
		// CIDR: nothing is local.
		LocalDetector: proxier.DetectByClusterCIDRs(),
	}
}

// cmpOpts compare Options; the feature gate is checked on its own
// (TestFeatureGates), and so is logging (TestCommandLogging).
var cmpOpts = cmp.Options{cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{}), cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(Options{}, "FeatureGates", "Logging")}

const header = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// calicoFile is kubeadmFile as a Calico cluster runs it: pods told apart
// by their "cali*" veths, no cluster CIDR.
var calicoFile = strings.NewReplacer(
	"clusterCIDR: 10.244.0.0/16", `clusterCIDR: ""`,
	`interfaceNamePrefix: ""`, "interfaceNamePrefix: cali",
	`detectLocalMode: ""`, "detectLocalMode: InterfaceNamePrefix",
).Replace(kubeadmFile)

// fullFile sets every field switchyard maps to a non-default value.
const fullFile = header + `
mode: ipvs
clientConnection:
  kubeconfig: /etc/kube/proxy.conf
  qps: 50
  burst: 100
  contentType: application/json
  acceptContentTypes: application/json
configSyncPeriod: 5m
hostnameOverride: " Node-1 "
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
detectLocalMode: BridgeInterface
detectLocal:
  bridgeInterface: cbr0
nodePortAddresses: [192.168.0.0/16, "fd00::/8"]
metricsBindAddress: 0.0.0.0:9100
healthzBindAddress: "[::]:9101"
udpIdleTimeout: 2s
enableProfiling: true
oomScoreAdj: -500
bindAddress: 192.168.1.5
bindAddressHardFail: true
showHiddenMetricsForVersion: "1.36"
iptables:
  masqueradeAll: true
  masqueradeBit: 0
  syncPeriod: 1m
  minSyncPeriod: 10s
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 90s
  tcpBeLiberal: true
  udpTimeout: 30s
  udpStreamTimeout: 2m
ipvs:
  scheduler: wlc
  syncPeriod: 45s
  minSyncPeriod: 2s
  tcpTimeout: 900s
  tcpFinTimeout: 120s
  udpTimeout: 300s
  strictARP: true
  excludeCIDRs: [192.0.2.0/24]
`

func fullFileOptions(path string) *Options {
	return &Options{
		ConfigFile:                path,
		Mode:                      ModeIPVS,
		Kubeconfig:                "/etc/kube/proxy.conf",
		KubeAPIQPS:                50,
		KubeAPIBurst:              100,
		KubeAPIContentType:        "application/json",
		KubeAPIAcceptContentTypes: "application/json",
		ConfigSyncPeriod:          5 * time.Minute,
		HostnameOverride:          "node-1",
		ClusterCIDRs:              []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/56")},
		LocalDetector:             proxier.DetectByBridge("cbr0"),
		MasqueradeAll:             true,
		MasqueradeBit:             0,
		NodePortAddresses:         []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00::/8")},
		MetricsBindAddress:        "0.0.0.0:9100",
		HealthzBindAddress:        "[::]:9101",
		IPTables:                  IPTablesOptions{SyncPeriod: time.Minute, MinSyncPeriod: 10 * time.Second},
		IPVS: IPVSOptions{
			SyncPeriod: 45 * time.Second, MinSyncPeriod: 2 * time.Second, Scheduler: "wlc",
			TCPTimeout: 900 * time.Second, TCPFinTimeout: 120 * time.Second, UDPTimeout: 300 * time.Second,
			StrictARP: true, ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
		},
		UDPIdleTimeout:       2 * time.Second,
		UDPMaxSessions:       1024, // flag only: no file field
		EnableProfiling:      true,
		UserspaceTransparent: true,
		VanishedGrace:        10 * time.Second,
		OOMScoreAdj:          -500,
		BindAddress:          netip.MustParseAddr("192.168.1.5"),
		BindAddressHardFail:  true,
		// An explicit 0 in the file is kept: "leave the kernel's value".
		Conntrack: conntrack.Tuning{
			TCPCloseWaitTimeout: 90 * time.Second, TCPBeLiberal: true, UDPTimeout: 30 * time.Second, UDPStreamTimeout: 2 * time.Minute,
		},
	}
}

func TestCommandOptions(t *testing.T) {
	full := writeConfig(t, fullFile)
	kubeadm := writeConfig(t, kubeadmFile)
	calico := writeConfig(t, calicoFile)
	tests := []struct {
		name string
		args []string
		want func() *Options
	}{
		{"defaults", nil, defaultOptions},
		{"file only", []string{"--config", full}, func() *Options { return fullFileOptions(full) }},
		{"kubeadm zero values mean defaults", []string{"--config=" + kubeadm}, func() *Options {
			o := defaultOptions()
			o.ConfigFile = kubeadm
			o.Kubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"
			o.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}
			o.LocalDetector = proxier.DetectByClusterCIDRs(o.ClusterCIDRs...)
			return o
		}},
		{"Calico-style file", []string{"--config=" + calico}, func() *Options {
			o := defaultOptions()
			o.ConfigFile = calico
			o.Kubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"
			o.LocalDetector = proxier.DetectByInterfacePrefix("cali")
			return o
		}},
		{"flags override file", []string{
			"--config", full, "--proxy-mode=userspace", "--cluster-cidr=10.0.0.0/8",
			"--iptables-sync-period=20s", "--iptables-masquerade-bit=3", "--ipvs-scheduler=rr",
			"--nodeport-addresses=primary", "--metrics-bind-address=", "--masquerade-all=false",
			"--kubeconfig=/k", "--udp-timeout=1s", "--profiling=false",
			"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=cali",
		}, func() *Options {
			o := fullFileOptions(full)
			o.Mode = ModeUserspace
			o.ClusterCIDRs = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
			o.LocalDetector = proxier.DetectByInterfacePrefix("cali")
			o.IPTables.SyncPeriod = 20 * time.Second
			o.MasqueradeBit = 3
			o.IPVS.Scheduler = "rr"
			o.NodePortAddresses, o.NodePortPrimary = nil, true
			o.MetricsBindAddress = "" // explicitly disabled
			o.MasqueradeAll = false
			o.Kubeconfig = "/k"
			o.UDPIdleTimeout = time.Second
			o.EnableProfiling = false
			return o
		}},
		{"every flag", []string{
			"--cleanup", "--proxy-mode", "ipvs", "--master", "https://10.0.0.1:6443",
			"--kube-api-qps=-1", "--kube-api-burst=0", "--kube-api-content-type=application/json",
			"--config-sync-period=1h", "--hostname-override=n1", "--service-proxy-name=switchyard",
			"--cluster-cidr=10.1.2.3/16", "--masquerade-all", "--iptables-masquerade-bit=31", "--masquerade-tcp-keep-port",
			"--nodeport-addresses=10.0.0.0/8", "--nodeport-addresses=fd00::1/64",
			"--metrics-bind-address=::1", "--healthz-bind-address=127.0.0.1",
			"--iptables-sync-period=2m", "--iptables-min-sync-period=0s",
			"--ipvs-scheduler=mh", "--ipvs-sync-period=10s", "--ipvs-min-sync-period=10s",
			"--ipvs-tcp-timeout=1m", "--ipvs-tcpfin-timeout=30s", "--ipvs-udp-timeout=5s",
			"--ipvs-strict-arp", "--udp-timeout=1s", "--userspace-udp-max-sessions=0", "--profiling",
			"--ipvs-strict-arp", "--udp-timeout=1s", "--userspace-transparent=false", "--profiling", "--userspace-restart-fallback",
			"--reset-vanished-endpoint-connections", "--vanished-endpoint-grace-period=30s", "--service-traffic-metrics",
			"--conntrack-max-per-core=0", "--conntrack-min=7", "--conntrack-tcp-timeout-established=1h",
			"--conntrack-tcp-timeout-close-wait=0", "--conntrack-tcp-be-liberal", "--conntrack-udp-timeout=10s",
			"--conntrack-udp-timeout-stream=1m", "--iptables-localhost-nodeports=false", "--init-only", "--oom-score-adj=100",
			"--bind-address=::1", "--bind-address-hard-fail", "--show-hidden-metrics-for-version=1.36",
			"--detect-local-mode=NodeCIDR", "--pod-bridge-interface=br0", "--pod-interface-name-prefix=veth",
		}, func() *Options {
			return &Options{
				Cleanup: true, InitOnly: true, OOMScoreAdj: 100,
				BindAddress: netip.IPv6Loopback(), BindAddressHardFail: true, Mode: ModeIPVS, Master: "https://10.0.0.1:6443",
				KubeAPIQPS: -1, KubeAPIContentType: "application/json",
				ConfigSyncPeriod: time.Hour, HostnameOverride: "n1", ServiceProxyName: "switchyard",
				ClusterCIDRs:  []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")},
				LocalDetector: proxier.DetectByNodeCIDR(),
				MasqueradeAll: true, MasqueradeBit: 31, MasqueradeTCPKeepPort: true,
				NodePortAddresses:  []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/64")},
				MetricsBindAddress: "[::1]:10249", HealthzBindAddress: "127.0.0.1:10256",
				IPTables: IPTablesOptions{SyncPeriod: 2 * time.Minute},
				IPVS: IPVSOptions{SyncPeriod: 10 * time.Second, MinSyncPeriod: 10 * time.Second, Scheduler: "mh",
					TCPTimeout: time.Minute, TCPFinTimeout: 30 * time.Second, UDPTimeout: 5 * time.Second, StrictARP: true},
				UDPIdleTimeout: time.Second, UDPMaxSessions: 0, EnableProfiling: true,
				ResetVanished: true, VanishedGrace: 30 * time.Second, UserspaceFallback: true, ServiceTraffic: true,
				Conntrack: conntrack.Tuning{Min: 7, TCPEstablishedTimeout: time.Hour, TCPBeLiberal: true,
					UDPTimeout: 10 * time.Second, UDPStreamTimeout: time.Minute},
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := execute(t, tt.args...)
			if res.err != nil {
				t.Fatalf("unexpected error: %v", res.err)
			}
			if res.calls != 1 {
				t.Fatalf("run called %d times, want 1", res.calls)
			}
			if diff := cmp.Diff(tt.want(), res.opts, cmpOpts); diff != "" {
				t.Errorf("Options mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// kubeadmFile is the shape of the ConfigMap kubeadm writes: zero values
// everywhere, which upstream's defaulting turns into the defaults.
const kubeadmFile = header + `
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: ""
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`

func TestCommandInvalid(t *testing.T) {
	file := func(body string) []string { return []string{"--config", writeConfig(t, header+body)} }
	tests := []struct {
		name string
		args []string
		want []string // each must appear in the error
	}{
		{"mode flag", []string{"--proxy-mode=bogus"}, []string{`invalid --proxy-mode "bogus": must be one of iptables, ipvs, nftables, userspace`}},
		{"mode file", file("mode: kernelspace\n"), []string{`invalid mode "kernelspace": must be one of iptables, ipvs, nftables, userspace`}},
		{"cluster cidr file", file("clusterCIDR: notacidr\n"), []string{`invalid clusterCIDR "notacidr": `}},
		{"cluster cidr flag", []string{"--cluster-cidr=10.0.0.0/33"}, []string{`invalid --cluster-cidr "10.0.0.0/33": `}},
		{"cluster cidr same family", []string{"--cluster-cidr=10.0.0.0/8,192.168.0.0/16"}, []string{`invalid --cluster-cidr "10.0.0.0/8,192.168.0.0/16": at most one CIDR per IP family`}},
		{"masquerade bit high", []string{"--iptables-masquerade-bit=32"}, []string{`invalid --iptables-masquerade-bit "32": must be within 0..31`}},
		{"masquerade bit negative file", file("iptables:\n  masqueradeBit: -1\n"), []string{`invalid iptables.masqueradeBit "-1": must be within 0..31`}},
		{"scheduler", []string{"--ipvs-scheduler=fifo"}, []string{`invalid --ipvs-scheduler "fifo": must be one of rr, lc, dh, sh, wrr, wlc, sed, nq, mh`}},
		{"scheduler file", file("ipvs:\n  scheduler: RR\n"), []string{`invalid ipvs.scheduler "RR"`}},
		{"sync period zero", []string{"--iptables-sync-period=0"}, []string{`invalid --iptables-sync-period "0s": must be greater than 0`}},
		{"ipvs sync negative file", file("ipvs:\n  syncPeriod: -5s\n"), []string{`invalid ipvs.syncPeriod "-5s": must be greater than 0`}},
		{"min negative", []string{"--ipvs-min-sync-period=-1s"}, []string{`invalid --ipvs-min-sync-period "-1s": must not be negative`}},
		{"ipvs timeout negative", []string{"--ipvs-tcp-timeout=-1s", "--ipvs-tcpfin-timeout=-2s", "--ipvs-udp-timeout=-3s"}, []string{
			`invalid --ipvs-tcp-timeout "-1s"`, `invalid --ipvs-tcpfin-timeout "-2s"`, `invalid --ipvs-udp-timeout "-3s"`}},
		{"udp timeout zero", []string{"--udp-timeout=0s"}, []string{`invalid --udp-timeout "0s": must be greater than 0`}},
		{"udp sessions negative", []string{"--userspace-udp-max-sessions=-1"}, []string{`invalid --userspace-udp-max-sessions "-1": must not be negative`}},
		{"config sync zero", []string{"--config-sync-period=0s"}, []string{`invalid --config-sync-period "0s"`}},
		{"min above max flags", []string{"--iptables-min-sync-period=40s"}, []string{`invalid --iptables-min-sync-period "40s": must not exceed --iptables-sync-period (30s)`}},
		{"min above max file and flag", append(file("ipvs:\n  minSyncPeriod: 1m\n"), "--ipvs-sync-period=10s"), []string{`invalid ipvs.minSyncPeriod "1m0s": must not exceed --ipvs-sync-period (10s)`}},
		{"bad duration flag", []string{"--iptables-sync-period=soon"}, []string{`invalid argument "soon" for "--iptables-sync-period" flag`}},
		{"bad duration file", file("iptables:\n  syncPeriod: soon\n"), []string{`invalid iptables.syncPeriod "soon": time: invalid duration`}},
		{"duration as number file", file("ipvs:\n  tcpTimeout: 30\n"), []string{`invalid ipvs.tcpTimeout 30: must be a duration string`}},
		{"unmapped duration file", file("conntrack:\n  udpTimeout: 1x\n"), []string{`invalid conntrack.udpTimeout "1x"`}},
		{"metrics no port", []string{"--metrics-bind-address=localhost"}, []string{`invalid --metrics-bind-address "localhost": must be IP:port`}},
		{"metrics host name", []string{"--metrics-bind-address=localhost:10249"}, []string{`invalid --metrics-bind-address "localhost:10249": must be IP:port: host is not an IP address`}},
		{"healthz port range", file("healthzBindAddress: 0.0.0.0:70000\n"), []string{`invalid healthzBindAddress "0.0.0.0:70000": must be IP:port: port must be within 1..65535`}},
		{"healthz port zero", []string{"--healthz-bind-address=0.0.0.0:0"}, []string{`invalid --healthz-bind-address "0.0.0.0:0"`}},
		{"vanished grace zero", []string{"--vanished-endpoint-grace-period=0s"}, []string{`invalid --vanished-endpoint-grace-period "0s": must be greater than 0`}},
		{"nodeport entry", []string{"--nodeport-addresses=10.0.0.0/8,10.0.0.1"}, []string{`invalid --nodeport-addresses "10.0.0.1": must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'`}},
		{"nodeport keyword twice", file("nodePortAddresses: [primary, 10.0.0.0/8, primary]\n"), []string{`invalid nodePortAddresses "primary,10.0.0.0/8,primary": duplicate keyword "primary"`}},
		{"nodeport unknown keyword", []string{"--nodeport-addresses=loopback"}, []string{`invalid --nodeport-addresses "loopback": must be a valid CIDR or one of the keywords`}},
		{"hostname", []string{"--hostname-override=bad_name"}, []string{`invalid --hostname-override "bad_name": must be a valid node name`}},
		{"service proxy name", []string{"--service-proxy-name=not a label"}, []string{`invalid --service-proxy-name "not a label": must be a valid label value`}},
		{"burst negative file", file("clientConnection:\n  burst: -1\n"), []string{`invalid clientConnection.burst "-1": must not be negative`}},
		{"unknown feature gate", []string{"--feature-gates=SomeGate=true"}, []string{`invalid --feature-gates "SomeGate=true": unrecognized feature gate: SomeGate`}},
		{"unknown feature gate file", file("featureGates:\n  SomeGate: true\n"), []string{`invalid featureGates "SomeGate=true": unrecognized feature gate: SomeGate`}},
		{"ipvs gated off", []string{"--proxy-mode=ipvs", "--feature-gates=KubeProxyIPVS=false"}, []string{`invalid --proxy-mode "ipvs": ipvs mode is disabled by the KubeProxyIPVS feature gate`}},
		{"exclude cidrs", []string{"--proxy-mode=ipvs", "--ipvs-exclude-cidrs=10.0.0.0/8,bogus"}, []string{`invalid --ipvs-exclude-cidrs "bogus"`}},
		{"bind address", []string{"--bind-address=node1"}, []string{`invalid --bind-address "node1": not a valid textual representation of an IP address`}},
		{"hidden metrics version", file("showHiddenMetricsForVersion: \"1.30\"\n"), []string{`invalid showHiddenMetricsForVersion "1.30": must be omitted or have the value '1.36'`}},
		{"oom score out of range", []string{"--oom-score-adj=1001"}, []string{`invalid --oom-score-adj "1001": must be within the range [-1000, 1000]`}},
		{"conntrack negatives", []string{"--conntrack-max-per-core=-1", "--conntrack-min=-2", "--conntrack-udp-timeout=-1s"}, []string{
			`invalid --conntrack-max-per-core "-1": must be greater than or equal to 0`,
			`invalid --conntrack-min "-2": must be greater than or equal to 0`,
			`invalid --conntrack-udp-timeout "-1s": must not be negative`,
		}},
		{"conntrack negative file", file("conntrack:\n  tcpCloseWaitTimeout: -5s\n  maxPerCore: -3\n"), []string{
			`invalid conntrack.maxPerCore "-3": must be greater than or equal to 0`,
			`invalid conntrack.tcpCloseWaitTimeout "-5s": must not be negative`,
		}},
		{"detect-local-mode flag", []string{"--detect-local-mode=PodCIDR"}, []string{
			`invalid --detect-local-mode "PodCIDR": must be one of ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix or empty (ClusterCIDR)`}},
		{"detectLocalMode file", file("detectLocalMode: clustercidr\n"), []string{`invalid detectLocalMode "clustercidr": must be one of `}},
		{"bridge missing, mode flag", []string{"--detect-local-mode=BridgeInterface"}, []string{
			`invalid --pod-bridge-interface "": must not be empty (--detect-local-mode is BridgeInterface)`}},
		{"bridge missing, mode file", file("detectLocalMode: BridgeInterface\n"), []string{
			`invalid detectLocal.bridgeInterface "": must not be empty (detectLocalMode is BridgeInterface)`}},
		{"prefix missing, mode file", file("detectLocalMode: InterfaceNamePrefix\ndetectLocal:\n  interfaceNamePrefix: \"\"\n"), []string{
			`invalid detectLocal.interfaceNamePrefix "": must not be empty (detectLocalMode is InterfaceNamePrefix)`}},
		{"bridge name too long file", file("detectLocalMode: BridgeInterface\ndetectLocal:\n  bridgeInterface: a-bridge-name-16\n"), []string{
			`invalid detectLocal.bridgeInterface "a-bridge-name-16": must be at most 15 characters (detectLocalMode is BridgeInterface)`}},
		{"prefix with a wildcard flag", []string{"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=cali+"}, []string{
			`invalid --pod-interface-name-prefix "cali+": must not contain`}},
		{"all errors reported", []string{"--proxy-mode=x", "--ipvs-scheduler=y"}, []string{`--proxy-mode "x"`, `--ipvs-scheduler "y"`}},
		{"wrong apiVersion", []string{"--config", writeConfig(t, "apiVersion: kubeproxy.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n")}, []string{`invalid apiVersion "kubeproxy.config.k8s.io/v1beta1": must be kubeproxy.config.k8s.io/v1alpha1`}},
		{"missing apiVersion", []string{"--config", writeConfig(t, "kind: KubeProxyConfiguration\n")}, []string{`invalid apiVersion ""`}},
		{"wrong kind", []string{"--config", writeConfig(t, "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n")}, []string{`invalid kind "KubeletConfiguration": must be KubeProxyConfiguration`}},
		{"type mismatch", file("iptables:\n  masqueradeBit: fourteen\n"), []string{"config file ", "iptables.masqueradeBit"}},
		{"duplicate key", file("mode: ipvs\nmode: iptables\n"), []string{`"mode" already set`}},
		{"not a mapping", []string{"--config", writeConfig(t, "- a\n- b\n")}, []string{"must be a YAML mapping"}},
		{"missing file", []string{"--config", "/nonexistent/switchyard.yaml"}, []string{"reading config file: open /nonexistent/switchyard.yaml"}},
		{"positional argument", []string{"extra"}, []string{`unknown command "extra"`}},
		{"unknown flag", []string{"--conntrack-max=1"}, []string{"unknown flag: --conntrack-max", "--help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := execute(t, tt.args...)
			if res.err == nil {
				t.Fatalf("no error; want one containing %q", tt.want)
			}
			t.Logf("error: %v", res.err)
			for _, w := range tt.want {
				if !strings.Contains(res.err.Error(), w) {
					t.Errorf("error %q does not contain %q", res.err, w)
				}
			}
		})
	}
}

func TestCommandWarnings(t *testing.T) {
	tests := []struct {
		name string
		body string
		args []string
		want []string
	}{
		{"unknown fields", `
mode: iptables
masqueradeAll: true
iptables:
  syncPeriod: 10s
  minSyncPeriodd: 1s
clientConnection:
  QPS: 3
`, nil, []string{
			`unknown field "clientConnection.QPS" is ignored`,
			`unknown field "iptables.minSyncPeriodd" is ignored`,
			`unknown field "masqueradeAll" is ignored`,
		}},
		{"unsupported fields", `
oomScoreAdj: -999
portRange: 30000-32767
`, nil, []string{
			`field "portRange" is not supported`,
		}},
		{"kubeadm file is quiet", strings.TrimPrefix(kubeadmFile, header), nil, nil},
		{"Calico-style file is quiet", strings.TrimPrefix(calicoFile, header), nil, nil},
		// Not a v1alpha1 field: kube-proxy's internal DetectLocal has
		// ClusterCIDRs, filled from clusterCIDR; its decoder drops this
		// one (lenient decoding, logged), and so does switchyard.
		{"detectLocal.clusterCIDRs is unknown", "clusterCIDR: 10.244.0.0/16\ndetectLocal:\n  clusterCIDRs: [10.244.0.0/16]\n", nil, []string{
			`unknown field "detectLocal.clusterCIDRs" is ignored`,
		}},
		{"bridge of another detect-local mode", "detectLocalMode: NodeCIDR\ndetectLocal:\n  bridgeInterface: cbr0\n", []string{"--pod-interface-name-prefix=cali"}, []string{
			"detectLocal.bridgeInterface has no effect: detectLocalMode is NodeCIDR, not BridgeInterface",
			"--pod-interface-name-prefix has no effect: detectLocalMode is NodeCIDR, not InterfaceNamePrefix",
		}},
		{"settings of another mode", "ipvs:\n  scheduler: lc\n", []string{"--ipvs-strict-arp", "--udp-timeout=1s"}, []string{
			"ipvs.scheduler has no effect in iptables mode",
			"--ipvs-strict-arp has no effect in iptables mode",
			"--udp-timeout has no effect in iptables mode",
		}},
		{"settings of the chosen mode", "ipvs:\n  scheduler: lc\n", []string{"--proxy-mode=ipvs"}, nil},
		{"vanished endpoints in ipvs mode", "mode: ipvs\n", []string{"--reset-vanished-endpoint-connections"}, nil},
		{"vanished endpoints in nftables mode", "mode: nftables\n", []string{"--reset-vanished-endpoint-connections"}, nil},
		{"vanished endpoints in userspace mode", "mode: userspace\n", []string{"--reset-vanished-endpoint-connections"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, header+tt.body)
			res := execute(t, append([]string{"--config", path}, tt.args...)...)
			if res.err != nil {
				t.Fatalf("unexpected error: %v", res.err)
			}
			if len(res.warnings) != len(tt.want) {
				t.Errorf("got %d warnings, want %d:\n%s", len(res.warnings), len(tt.want), strings.Join(res.warnings, "\n"))
			}
			for i, w := range tt.want {
				if i < len(res.warnings) && !strings.Contains(res.warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, res.warnings[i], w)
				}
			}
		})
	}
}

func TestCommandHelpListsEveryFlag(t *testing.T) {
	res := execute(t, "--help")
	if res.err != nil || res.calls != 0 {
		t.Fatalf("--help: err=%v calls=%d", res.err, res.calls)
	}
	want := []string{
		"--proxy-mode string", "--kubeconfig", "--master", "--hostname-override", "--cluster-cidr",
		"--masquerade-all", "--iptables-sync-period duration", "--iptables-min-sync-period",
		"--iptables-masquerade-bit int32", "--ipvs-scheduler", "--ipvs-sync-period", "--ipvs-min-sync-period",
		"--ipvs-tcp-timeout", "--ipvs-tcpfin-timeout", "--ipvs-udp-timeout", "--ipvs-strict-arp",
		"--nodeport-addresses strings", "--metrics-bind-address", "--healthz-bind-address", "--cleanup",
		"--config string", "-v, --v Level", "--vmodule", "--service-proxy-name", "--udp-timeout", "--userspace-transparent",
		"--reset-vanished-endpoint-connections", "--service-traffic-metrics", "--masquerade-tcp-keep-port",
		"--kube-api-qps", "--kube-api-burst", "--kube-api-content-type", "--config-sync-period",
		"--version", "-h, --help", "--userspace-udp-max-sessions int",
		`(default "iptables")`, `(default "127.0.0.1:10249")`, `(default "0.0.0.0:10256")`,
		`(default "rr")`, "(default 30s)", "(default 14)", "(default 250ms)", "(default 1024)",
		"Unset, syncs are paced by their cost",
	}
	for _, w := range want {
		if !strings.Contains(res.out, w) {
			t.Errorf("--help output lacks %q", w)
		}
	}
	cmd := newCommand(nil, nil)
	cmd.InitDefaultVersionFlag()
	cmd.InitDefaultHelpFlag()
	for _, name := range flagNames(cmd.Flags()) {
		if !strings.Contains(res.out, "--"+name+" ") {
			t.Errorf("--help output lacks registered flag --%s", name)
		}
	}
}

func TestCommandVersion(t *testing.T) {
	res := execute(t, "--version")
	if res.err != nil || res.calls != 0 {
		t.Fatalf("--version: err=%v calls=%d", res.err, res.calls)
	}
	if res.out != "switchyard "+Version+"\n" {
		t.Errorf("--version printed %q, want %q", res.out, "switchyard "+Version+"\n")
	}
}

func TestCommandRunErrorAndContext(t *testing.T) {
	wantErr := errors.New("backend failed")
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "marker")
	var gotCtx context.Context
	cmd := newCommand(func(c context.Context, _ *Options) error {
		gotCtx = c
		return wantErr
	}, func(string) {})
	cmd.SetArgs(nil)
	err := cmd.ExecuteContext(ctx)
	if !errors.Is(err, wantErr) {
		t.Errorf("Execute error = %v, want %v", err, wantErr)
	}
	if gotCtx == nil || gotCtx.Value(ctxKey{}) != "marker" {
		t.Errorf("run did not receive the command's context")
	}
}

// TestCommandLogging checks the logging configuration handed to the
// daemon: the file's logging section, with logging flags winning, and
// kube-proxy's validation.
func TestCommandLogging(t *testing.T) {
	path := writeConfig(t, header+"logging:\n  verbosity: 3\n  format: json\n")
	tests := []struct {
		args    []string
		v       uint32
		format  string
		vmodule string
	}{
		{nil, 0, "text", ""},
		{[]string{"--config", path}, 3, "json", ""},
		{[]string{"--config", path, "-v", "1", "--logging-format=text", "--vmodule=proxier=5"}, 1, "text", "proxier=5"},
		{[]string{"--v=5", "--vmodule=backend=4"}, 5, "text", "backend=4"},
	}
	for _, tt := range tests {
		res := execute(t, tt.args...)
		if res.err != nil {
			t.Fatalf("%v: %v", tt.args, res.err)
		}
		l := res.opts.Logging
		vmodule := logsapi.VModuleConfigurationPflag(&l.VModule).String()
		if uint32(l.Verbosity) != tt.v || l.Format != tt.format || vmodule != tt.vmodule {
			t.Errorf("%v: logging v=%d format=%q vmodule=%q, want %d %q %q", tt.args, l.Verbosity, l.Format, vmodule, tt.v, tt.format, tt.vmodule)
		}
	}
	for args, want := range map[string]string{
		"--logging-format=xml":               `logging.format: Invalid value: "xml": Unsupported log format`,
		"--log-json-split-stream":            "LoggingAlphaOptions",
		"--log-flush-frequency=notaduration": "--log-flush-frequency",
	} {
		res := execute(t, args)
		if res.err == nil || !strings.Contains(res.err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", args, res.err, want)
		}
	}
}

// TestDeployConfigMapLoadsCleanly parses deploy/'s ConfigMap the way the
// DaemonSet hands it over, in every mode an operator can set there: no
// error and no warning, so a fresh install logs nothing to worry about.
func TestDeployConfigMapLoadsCleanly(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	conf := cm.Data["config.conf"]
	if !strings.Contains(conf, "\nmode: iptables") {
		t.Fatalf("config.conf has no `mode: iptables` line:\n%s", conf)
	}
	for _, mode := range []string{"iptables", "nftables", "userspace", "ipvs"} {
		path := writeConfig(t, strings.Replace(conf, "\nmode: iptables", "\nmode: "+mode, 1))
		res := execute(t, "--config="+path, "--hostname-override=node-a")
		if res.err != nil || len(res.warnings) != 0 {
			t.Errorf("mode %s: error %v, warnings %q", mode, res.err, res.warnings)
		}
	}
}
