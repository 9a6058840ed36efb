//go:build e2e

package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// testConntrackTimeouts: the daemon sets kube-proxy's per-namespace TCP
// timeouts at start (established 24h, close-wait 1h), whatever the mode.
// Upstream's "[sig-network] KubeProxy should set TCP CLOSE_WAIT timeout"
// reads the latter from a real entry.
func testConntrackTimeouts(t *testing.T, m *modeEnv) {
	for name, want := range map[string]int{
		"nf_conntrack_tcp_timeout_established": 86400,
		"nf_conntrack_tcp_timeout_close_wait":  3600,
	} {
		out, err := framework.RunIn(t.Context(), m.Topo.NodeNS, "cat", "/proc/sys/net/netfilter/"+name)
		if err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		if got, _ := strconv.Atoi(strings.TrimSpace(out)); got != want {
			t.Errorf("%s = %q in the node namespace, want %d", name, strings.TrimSpace(out), want)
		}
	}
}

// testLocalhostNodePort: with the default configuration a NodePort
// answers on 127.0.0.1 of the node in iptables mode
// (--iptables-localhost-nodeports defaults to true and the daemon sets
// route_localnet) and in nftables mode (its default NodePort addresses
// are "primary" and 127.0.0.1/32, served by the userspace relay:
// KEP-6032); on ::1 it answers in neither, as the defaults name no IPv6
// loopback.
func testLocalhostNodePort(t *testing.T, m *modeEnv) {
	svc := nodePortEcho(t, m.Env, "np-localhost")
	m.eachFamily(t, func(t *testing.T, f famView) {
		// The node address first: once it answers, the rules are in.
		waitServed(t, f.Topo.ClientNS, "tcp", hostPort(f.Topo.NodeIP, svc.Spec.Ports[0].NodePort), podNames(f.Topo.Pods), false)
		loopback := "127.0.0.1"
		if f.is6() {
			loopback = "::1"
		}
		local := hostPort(loopback, svc.Spec.Ports[0].NodePort)
		switch {
		case f.is6():
		case m.mode == "iptables":
			checkLocalhostNodePortServed(t, m, local)
			return
		case m.mode == "nftables":
			checkLocalhostNodePortRelayed(t, m, local)
			return
		}
		counts, _ := framework.EchoMany(t.Context(), m.Topo.NodeNS, "tcp", local, 3)
		for pod := range counts {
			if pod != "" {
				t.Errorf("%s mode: localhost NodePort %s answered (%v); its NodePort addresses name no loopback", m.mode, local, counts)
			}
		}
	})
}

// checkLocalhostNodePortRelayed: the NodePort at local (127.0.0.1)
// answers from the node through nftables mode's relay, which reports
// its listener.
func checkLocalhostNodePortRelayed(t *testing.T, m *modeEnv, local string) {
	t.Helper()
	waitServed(t, m.Topo.NodeNS, "tcp", local, podNames(m.Topo.Pods), true)
	const metric = "kubeproxy_nftables_localhost_nodeport_listeners"
	if n, err := m.daemon.MetricValue(t.Context(), metric, map[string]string{"ip_family": "IPv4"}); err != nil || n < 1 {
		t.Errorf("%s{ip_family=IPv4} = %v (%v), want at least 1", metric, n, err)
	}
}

// checkLocalhostNodePortServed: the NodePort at local (127.0.0.1) answers
// from the node, and kube-proxy's nfacct metric counts the packets
// accepted there.
func checkLocalhostNodePortServed(t *testing.T, m *modeEnv, local string) {
	t.Helper()
	const metric = "kubeproxy_iptables_localhost_nodeports_accepted_packets_total"
	before, err := m.daemon.MetricValue(t.Context(), metric, nil)
	if err != nil {
		t.Fatalf("%s before: %v", metric, err)
	}
	waitServed(t, m.Topo.NodeNS, "tcp", local, podNames(m.Topo.Pods), true)
	after, err := m.daemon.MetricValue(t.Context(), metric, nil)
	if err != nil || after < before+30 {
		t.Errorf("%s went from %v to %v (%v) over 30+ connections", metric, before, after, err)
	}
}

// TestInitOnly: --init-only makes the node settings in the daemon's
// network namespace and exits 0 without an API server and without
// programming any rule (the privileged half of deploy/'s split DaemonSet).
func TestInitOnly(t *testing.T) {
	bin, err := suite.DaemonBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		args          []string
		routeLocalnet string
	}{
		{"iptables", []string{"--proxy-mode=iptables", "--conntrack-udp-timeout=45s"}, "1"},
		{"nftables", []string{"--proxy-mode=nftables", "--conntrack-udp-timeout=45s"}, "0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := freshNetns(t)
			args := append([]string{"--init-only", "--kubeconfig=/nonexistent", "--hostname-override=node-x",
				"--conntrack-max-per-core=0"}, tc.args...)
			if code, stderr := runExit(t, ns, bin, args...); code != 0 {
				t.Fatalf("exit code %d, want 0; stderr:\n%s", code, stderr)
			}
			for path, want := range map[string]string{
				"net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
				"net/netfilter/nf_conntrack_tcp_timeout_close_wait":  "3600",
				"net/netfilter/nf_conntrack_udp_timeout":             "45",
				"net/ipv4/conf/all/route_localnet":                   tc.routeLocalnet,
			} {
				out, err := framework.RunIn(t.Context(), ns, "cat", "/proc/sys/"+path)
				if err != nil || strings.TrimSpace(out) != want {
					t.Errorf("%s = %q (%v), want %s", path, strings.TrimSpace(out), err, want)
				}
			}
			if rules := kernelState(t, ns); rules != "" {
				t.Errorf("--init-only programmed rules:\n%s", rules)
			}
		})
	}
}

// TestLoggingFormatJSON: --logging-format=json makes every log line a JSON
// object with component-base's keys (kube-proxy's): ts, caller, msg, v.
func TestLoggingFormatJSON(t *testing.T) {
	bin, err := suite.DaemonBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ns := freshNetns(t)
	out, err := framework.RunIn(t.Context(), ns, bin, "--init-only", "--logging-format=json", "--v=2",
		"--kubeconfig=/nonexistent", "--hostname-override=node-x", "--conntrack-max-per-core=0")
	if err != nil {
		t.Fatalf("--init-only --logging-format=json: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("want at least two log lines, got %q", out)
	}
	for _, line := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Errorf("not a JSON line: %q (%v)", line, err)
			continue
		}
		for _, key := range []string{"ts", "caller", "msg", "v"} {
			if _, ok := entry[key]; !ok {
				t.Errorf("line %q has no %q", line, key)
			}
		}
	}
}
