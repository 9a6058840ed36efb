//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

func TestDpRulePosition(t *testing.T) {
	v4 := []string{
		"-N KUBE-SERVICES",
		`-A KUBE-SERVICES -d 10.96.1.23/32 -p tcp -m comment --comment "ns/a:rr cluster IP" -m tcp --dport 80 -j KUBE-SVC-A`,
		`-A KUBE-SERVICES -d 10.96.1.2/32 -p tcp -m comment --comment "ns/b:rr cluster IP" -m tcp --dport 8080 -j KUBE-SVC-B`,
		`-A KUBE-SERVICES -d 10.96.1.2/32 -p tcp -m comment --comment "ns/b:rr cluster IP" -m tcp --dport 80 -j KUBE-SVC-C`,
	}
	if got := dpRulePosition(v4, "10.96.1.2", 80); got != 3 {
		t.Errorf("IPv4: rule %d, want 3 (not the longer address nor port 8080)", got)
	}
	v6 := []string{
		"-N KUBE-SERVICES",
		`-A KUBE-SERVICES -d fd00:10:96::8bd/128 -p tcp -m tcp --dport 80 -j KUBE-SVC-A`,
		`-A KUBE-SERVICES -d fd00:10:96::8bd1/128 -p tcp -m tcp --dport 80 -j KUBE-SVC-B`,
	}
	if got := dpRulePosition(v6, "fd00:10:96::8bd1", 80); got != 2 {
		t.Errorf("IPv6: rule %d, want 2", got)
	}
	if got := dpRulePosition(v6, "10.96.1.2", 80); got != 0 {
		t.Errorf("an address not listed: rule %d", got)
	}
	if got := dpRulePosition(v6, "not-an-ip", 80); got != 0 {
		t.Errorf("a bad address: rule %d", got)
	}
}

func TestDpIptablesBin(t *testing.T) {
	for _, c := range []struct {
		mode string
		v6   bool
		want string
	}{
		{"iptables", false, "iptables-nft"}, {"iptables-legacy", false, "iptables-legacy"},
		{"iptables", true, "ip6tables-nft"}, {"iptables-legacy", true, "ip6tables-legacy"},
	} {
		if got := dpIptablesBin(c.mode, c.v6); got != c.want {
			t.Errorf("%s v6=%v: %s, want %s", c.mode, c.v6, got, c.want)
		}
	}
}

// TestDpReportSaysTheFamily: the table's title, every per-series line, the
// proxy ratio lines and the result line carry the run's family, before
// the VM's env label.
func TestDpReportSaysTheFamily(t *testing.T) {
	res := dpResult{Rate: 1000, ConnectP50: 50, ConnectP99: 90, Ops: 1}
	var samples []dpSample
	for _, p := range [][2]string{{"none", "direct"}, {"switchyard", "nftables"}, {"kube-proxy", "nftables"}} {
		for _, w := range []string{"short", "latency"} {
			samples = append(samples, dpSample{n: 100, proxy: p[0], mode: p[1], via: "clusterip", workload: w, res: res})
		}
	}
	for _, c := range []struct {
		shape    framework.Shape
		envLabel string
		tail     string
	}{
		{framework.ShapeIPv4, "", " family=ipv4"},
		{framework.ShapeIPv6, "", " family=ipv6"},
		{framework.ShapeIPv6, "vm-tcg", " family=ipv6 env=vm-tcg"},
	} {
		var out strings.Builder
		cfg := dpConfig{shape: c.shape, envLabel: c.envLabel, out: &out, rounds: 1, duration: time.Second,
			paths: []string{"direct", "switchyard:nftables", "kube-proxy:nftables"}, vias: []string{"clusterip"}, workloads: []string{"short", "latency"}}
		dpReport(t, cfg, 100, samples)
		dpSummary(t, cfg, []int{100}, samples)
		lines := 0
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			switch {
			case strings.HasPrefix(l, "100 Services"):
				if !strings.HasPrefix(l, "100 Services, family="+string(c.shape)+" (") {
					t.Errorf("title %q", l)
				}
			case strings.HasPrefix(l, "dataplane"):
				lines++
				if !strings.HasSuffix(l, c.tail) || strings.Count(l, "family=") != 1 {
					t.Errorf("%s %q: line %q does not end in %q", c.shape, c.envLabel, l, c.tail)
				}
			}
		}
		// direct, switchyard and kube-proxy: short + p50 + p99 each, two
		// ratio lines, one result line.
		if lines != 3*3+2+1 {
			t.Errorf("%s %q: %d machine-readable lines:\n%s", c.shape, c.envLabel, lines, out.String())
		}
	}
}
