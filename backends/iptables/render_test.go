package iptables

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current render")

type epMap = map[proxier.ServicePortName][]proxier.Endpoint

type goldenCase struct {
	name   string
	config func(*Config)
	state  *proxier.State
}

func goldenCases() []goldenCase {
	web := svc("default", "web", "http", v1.ProtocolTCP, 80, "10.96.0.10")
	webDNS := svc("default", "web", "dns", v1.ProtocolUDP, 53, "10.96.0.10")
	threeEps := []proxier.Endpoint{ep("10.244.1.1:8080"), ep("10.244.2.1:8080"), ep("10.244.3.1:8080", local)}
	np := with(svc("default", "np", "", v1.ProtocolTCP, 80, "10.96.0.20"), nodePort(30080))
	ext := with(svc("default", "ext", "http", v1.ProtocolTCP, 80, "10.96.0.30"), externalIPs("192.0.2.30", "2001:db8::30"))
	lb := with(svc("default", "lb", "https", v1.ProtocolTCP, 443, "10.96.0.40"), nodePort(30443), lbIPs("198.51.100.40"),
		sourceRangesOpt("203.0.113.0/24", "192.168.0.0/16"))
	aff := with(svc("default", "sticky", "http", v1.ProtocolTCP, 80, "10.96.0.50"), affinity(10800))
	etp := with(svc("default", "etp", "http", v1.ProtocolTCP, 80, "10.96.0.60"), nodePort(30060), lbIPs("198.51.100.60"), etpLocal(31060))
	itp := with(svc("default", "itp", "http", v1.ProtocolTCP, 80, "10.96.0.70"), itpLocal())
	itpNone := with(svc("default", "itp-none", "http", v1.ProtocolTCP, 80, "10.96.0.71"), itpLocal())
	etpNone := with(svc("default", "etp-none", "http", v1.ProtocolTCP, 80, "10.96.0.61"), nodePort(30061), externalIPs("192.0.2.61"), etpLocal(31061))
	both := with(svc("default", "both", "http", v1.ProtocolTCP, 80, "10.96.0.75"), nodePort(30075), itpLocal(), etpLocal(31075))
	none := with(svc("default", "kubernetes", "https", v1.ProtocolTCP, 443, "10.96.0.1"), nodePort(30001), externalIPs("192.0.2.1"), lbIPs("198.51.100.1"))
	term := svc("default", "term", "http", v1.ProtocolSCTP, 80, "10.96.0.80")
	dual := with(svc("default", "dual", "http", v1.ProtocolTCP, 80, "10.96.0.90", "fd00:96::90"), nodePort(30090))
	node := []string{"192.168.1.10", "fd00:1::10"}
	return append([]goldenCase{
		{name: "clusterip", state: stateOf(node, []*proxier.ServicePort{web}, epMap{web.Name: threeEps})},
		{name: "multiport", state: stateOf(node, []*proxier.ServicePort{web, webDNS}, epMap{
			web.Name: threeEps, webDNS.Name: {ep("10.244.1.1:5353"), ep("10.244.2.1:5353")}})},
		{name: "nodeport", state: stateOf(node, []*proxier.ServicePort{np}, epMap{np.Name: threeEps})},
		{name: "nodeport-addresses", state: stateOf(node, []*proxier.ServicePort{np}, epMap{np.Name: threeEps}),
			config: func(c *Config) {
				c.NodePortAddresses = mustPrefixes("192.168.1.0/24", "127.0.0.0/8", "fd00:1::/64")
				c.MasqueradeAll = true
			}},
		{name: "localhost-nodeports", state: stateOf(node, []*proxier.ServicePort{np}, epMap{np.Name: threeEps}),
			config: func(c *Config) { c.LocalhostNodePorts = true }},
		// kube-proxy's nfacct counters, and no INVALID drop when conntrack
		// is liberal about TCP windows.
		{name: "nfacct", state: stateOf(node, []*proxier.ServicePort{np}, epMap{np.Name: threeEps}),
			config: func(c *Config) { c.LocalhostNodePorts, c.NFAcct = true, true }},
		{name: "tcp-be-liberal", state: stateOf(node, []*proxier.ServicePort{np}, epMap{np.Name: threeEps}),
			config: func(c *Config) { c.ConntrackTCPLiberal = true }},
		{name: "externalips", state: stateOf(node, []*proxier.ServicePort{ext}, epMap{ext.Name: threeEps[:1]})},
		{name: "loadbalancer", state: stateOf(node, []*proxier.ServicePort{lb}, epMap{lb.Name: threeEps})},
		{name: "affinity", state: stateOf(node, []*proxier.ServicePort{aff}, epMap{aff.Name: threeEps[:2]})},
		{name: "etp-local", state: stateOf(node, []*proxier.ServicePort{etp, etpNone}, epMap{
			etp.Name: threeEps, etpNone.Name: threeEps[:2]})},
		{name: "itp-local", state: stateOf(node, []*proxier.ServicePort{itp, itpNone}, epMap{
			itp.Name: threeEps, itpNone.Name: threeEps[:2]})},
		// Both policies Local: no Cluster endpoints are selected, so the
		// short-circuit rules fall back to the Local chain.
		{name: "itp-etp-local", state: stateOf(node, []*proxier.ServicePort{both}, epMap{both.Name: threeEps})},
		{name: "no-endpoints", state: stateOf(node, []*proxier.ServicePort{none}, epMap{
			none.Name: {ep("10.244.1.9:443", notReady)}})},
		{name: "terminating-only", state: stateOf(node, []*proxier.ServicePort{term}, epMap{
			term.Name: {ep("10.244.1.1:8080", terminating), ep("10.244.2.1:8080", notReady), ep("10.244.3.1:8080", terminating, local)}})},
		{name: "dual-stack", state: stateOf(node, []*proxier.ServicePort{dual, ext}, epMap{
			dual.Name: {ep("10.244.1.1:8080"), ep("[fd00:10:244:1::1]:8080"), ep("[fd00:10:244:2::1]:8080", local)},
			ext.Name:  {ep("10.244.1.2:8080"), ep("[fd00:10:244:1::2]:8080")}}),
			config: func(c *Config) { c.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} }},
	}, detectorGoldenCases(node)...)
}

// detectorGoldenCases render the local-traffic match of each
// --detect-local-mode where kube-proxy writes it: the masquerade rule of
// cluster-IP traffic that is not local (KUBE-SVC) and the pod
// short-circuit of externalTrafficPolicy Local (KUBE-EXT).
func detectorGoldenCases(node []string) []goldenCase {
	dual := with(svc("default", "dual", "http", v1.ProtocolTCP, 80, "10.96.0.90", "fd00:96::90"), nodePort(30090), etpLocal(31090))
	eps := epMap{dual.Name: {ep("10.244.1.1:8080", local), ep("10.244.2.1:8080"), ep("[fd00:10:244:1::1]:8080", local)}}
	// The node has an IPv4 pod CIDR only: NodeCIDR detects nothing in IPv6.
	st := stateOf(node, []*proxier.ServicePort{dual}, eps)
	st.Node.PodCIDRs = mustPrefixes("10.244.1.0/24")
	detect := func(d proxier.LocalDetector) func(*Config) {
		return func(c *Config) { c.Families, c.LocalDetector = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, d }
	}
	return []goldenCase{
		{name: "detect-cluster-cidr-v4-only", state: st, config: detect(proxier.DetectByClusterCIDRs(mustPrefixes("10.244.0.0/16")...))},
		{name: "detect-node-cidr", state: st, config: detect(proxier.DetectByNodeCIDR())},
		{name: "detect-bridge", state: st, config: detect(proxier.DetectByBridge("cbr0"))},
		{name: "detect-interface-prefix", state: st, config: detect(proxier.DetectByInterfacePrefix("cali"))},
		{name: "detect-none", state: st, config: detect(proxier.LocalDetector{})},
	}
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.config != nil {
				tc.config(cfg)
			}
			var got strings.Builder
			for _, fam := range cfg.families() {
				text := render(cfg.forFamily(fam), tc.state).String()
				checkRestoreText(t, text)
				got.WriteString("# family " + string(fam) + "\n" + text)
			}
			compareGolden(t, filepath.Join("testdata", tc.name+".golden"), got.String())
		})
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// checkRestoreText checks what iptables-restore (and the kernel) would
// insist on: every rule is in a declared chain, every jump goes to a
// declared chain or a built-in target, and nat KUBE-SERVICES ends with the
// jump to KUBE-NODEPORTS.
func checkRestoreText(t *testing.T, text string) {
	t.Helper()
	builtinTargets := map[string]bool{"ACCEPT": true, "DROP": true, "REJECT": true, "RETURN": true,
		"DNAT": true, "MARK": true, "MASQUERADE": true}
	var tbl string
	declared := map[string]bool{}
	var lastNATServices string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "*"):
			tbl, declared = line[1:], map[string]bool{}
		case strings.HasPrefix(line, ":"):
			declared[f[0][1:]] = true
		case line == "COMMIT":
		case f[0] == "-A":
			if !declared[f[1]] {
				t.Errorf("%s: rule in undeclared chain: %s", tbl, line)
			}
			if target := jumpTarget(f); target != "" && !builtinTargets[target] && !declared[target] {
				t.Errorf("%s: jump to undeclared chain %s: %s", tbl, target, line)
			}
			if tbl == "nat" && f[1] == chainServices {
				lastNATServices = line
			}
		default:
			t.Errorf("unexpected line %q", line)
		}
	}
	if !strings.HasSuffix(lastNATServices, "-j "+chainNodePorts) {
		t.Errorf("last rule of nat KUBE-SERVICES is %q, want the jump to KUBE-NODEPORTS", lastNATServices)
	}
}

func jumpTarget(fields []string) string {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "-j" {
			return fields[i+1]
		}
	}
	return ""
}
