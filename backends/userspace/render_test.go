package userspace

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// renderState: "web" is a LoadBalancer service with
// externalTrafficPolicy Local (so a separate external socket), source
// ranges, one local and one remote endpoint; "dns" is UDP without
// endpoints.
func renderState() *proxier.State {
	st := newState()
	web := addService(st, spName("web", v1.ProtocolTCP), "10.96.0.10", 80)
	web.NodePort = 30080
	web.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::99")}
	web.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.10")}
	web.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("10.244.1.0/24")}
	web.ExternalPolicyLocal = true
	st.Endpoints[web.Name] = []proxier.Endpoint{
		{IP: netip.MustParseAddr("10.244.1.2"), Port: 8080, Ready: true, Serving: true, NodeName: "node-a", IsLocal: true},
		{IP: netip.MustParseAddr("10.244.2.3"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"},
	}
	addService(st, spName("dns", v1.ProtocolUDP), "10.96.0.53", 53)
	return st
}

func renderPorts(fam v1.IPFamily) map[socketKey]uint16 {
	return map[socketKey]uint16{
		{name: spName("web", v1.ProtocolTCP), family: fam, kind: internalTraffic}: 40001,
		{name: spName("web", v1.ProtocolTCP), family: fam, kind: externalTraffic}: 40002,
		{name: spName("dns", v1.ProtocolUDP), family: fam, kind: internalTraffic}: 40003,
	}
}

const renderGolden = `*nat
:KUBE-PORTALS-CONTAINER - [0:0]
:KUBE-PORTALS-HOST - [0:0]
:KUBE-NODEPORT-CONTAINER - [0:0]
:KUBE-NODEPORT-HOST - [0:0]
:KUBE-PORTALS-MASQ - [0:0]
-A KUBE-PORTALS-CONTAINER -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001
-A KUBE-PORTALS-CONTAINER -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP fallback" -m tcp --dport 80 -j MARK --set-xmark 0x4000/0x4000
-A KUBE-PORTALS-CONTAINER -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP fallback" -m tcp --dport 80 -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-PORTALS-CONTAINER -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP fallback" -m tcp --dport 80 -j DNAT --to-destination 10.244.2.3:8080
-A KUBE-PORTALS-CONTAINER -s 10.244.0.0/16 -d 192.0.2.10/32 -p tcp -m comment --comment "ns/web:p external IP from pods" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001
-A KUBE-PORTALS-CONTAINER -s 10.244.0.0/16 -d 192.0.2.10/32 -p tcp -m comment --comment "ns/web:p external IP from pods fallback" -m tcp --dport 80 -j MARK --set-xmark 0x4000/0x4000
-A KUBE-PORTALS-CONTAINER -s 10.244.0.0/16 -d 192.0.2.10/32 -p tcp -m comment --comment "ns/web:p external IP from pods fallback" -m tcp --dport 80 -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-PORTALS-CONTAINER -s 10.244.0.0/16 -d 192.0.2.10/32 -p tcp -m comment --comment "ns/web:p external IP from pods fallback" -m tcp --dport 80 -j DNAT --to-destination 10.244.2.3:8080
-A KUBE-PORTALS-CONTAINER -d 192.0.2.10/32 -p tcp -m comment --comment "ns/web:p external IP" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40002
-A KUBE-PORTALS-CONTAINER -d 192.0.2.10/32 -p tcp -m comment --comment "ns/web:p external IP fallback" -m tcp --dport 80 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-PORTALS-CONTAINER -s 203.0.113.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40002
-A KUBE-PORTALS-CONTAINER -s 203.0.113.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP fallback" -m tcp --dport 80 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-PORTALS-CONTAINER -s 10.244.1.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP from pods" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001
-A KUBE-PORTALS-CONTAINER -s 10.244.1.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP from pods fallback" -m tcp --dport 80 -j MARK --set-xmark 0x4000/0x4000
-A KUBE-PORTALS-CONTAINER -s 10.244.1.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP from pods fallback" -m tcp --dport 80 -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-PORTALS-CONTAINER -s 10.244.1.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP from pods fallback" -m tcp --dport 80 -j DNAT --to-destination 10.244.2.3:8080
-A KUBE-PORTALS-CONTAINER -s 10.244.1.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40002
-A KUBE-PORTALS-CONTAINER -s 10.244.1.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP fallback" -m tcp --dport 80 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-PORTALS-HOST -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP" -m tcp --dport 80 -j DNAT --to-destination 192.168.0.10:40001
-A KUBE-PORTALS-HOST -d 192.0.2.10/32 -p tcp -m comment --comment "ns/web:p external IP" -m tcp --dport 80 -j DNAT --to-destination 192.168.0.10:40001
-A KUBE-PORTALS-HOST -s 203.0.113.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP" -m tcp --dport 80 -j DNAT --to-destination 192.168.0.10:40001
-A KUBE-PORTALS-HOST -s 10.244.1.0/24 -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP" -m tcp --dport 80 -j DNAT --to-destination 192.168.0.10:40001
-A KUBE-NODEPORT-CONTAINER -s 10.244.0.0/16 -p tcp -m comment --comment "ns/web:p nodePort from pods" -m tcp --dport 30080 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001
-A KUBE-NODEPORT-CONTAINER -s 10.244.0.0/16 -p tcp -m comment --comment "ns/web:p nodePort from pods fallback" -m tcp --dport 30080 -j MARK --set-xmark 0x4000/0x4000
-A KUBE-NODEPORT-CONTAINER -s 10.244.0.0/16 -p tcp -m comment --comment "ns/web:p nodePort from pods fallback" -m tcp --dport 30080 -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-NODEPORT-CONTAINER -s 10.244.0.0/16 -p tcp -m comment --comment "ns/web:p nodePort from pods fallback" -m tcp --dport 30080 -j DNAT --to-destination 10.244.2.3:8080
-A KUBE-NODEPORT-CONTAINER -p tcp -m comment --comment "ns/web:p nodePort" -m tcp --dport 30080 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40002
-A KUBE-NODEPORT-CONTAINER -p tcp -m comment --comment "ns/web:p nodePort fallback" -m tcp --dport 30080 -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-NODEPORT-HOST -p tcp -m comment --comment "ns/web:p nodePort" -m tcp --dport 30080 -j DNAT --to-destination 192.168.0.10:40001
-A KUBE-PORTALS-MASQ -m mark --mark 0x4000/0x4000 -m comment --comment "userspace proxy: kernel fallback" -j MASQUERADE
COMMIT
*filter
:KUBE-PORTALS-FILTER - [0:0]
-A KUBE-PORTALS-FILTER -d 10.96.0.53/32 -p udp -m comment --comment "ns/dns:p cluster IP has no endpoints" -m udp --dport 53 -j REJECT
-A KUBE-PORTALS-FILTER -d 198.51.100.10/32 -p tcp -m comment --comment "ns/web:p loadbalancer IP source not in loadBalancerSourceRanges" -m tcp --dport 80 -j DROP
COMMIT
*mangle
:KUBE-PORTALS-MARK - [0:0]
-A KUBE-PORTALS-MARK -m conntrack --ctstate DNAT -m comment --comment "NATed flows keep their path" -j RETURN
-A KUBE-PORTALS-MARK -p tcp -m socket --transparent -m comment --comment "userspace proxy socket" -j MARK --set-xmark 0x1000/0x1000
-A KUBE-PORTALS-MARK -p udp -m socket --transparent -m comment --comment "userspace proxy socket" -j MARK --set-xmark 0x1000/0x1000
-A KUBE-PORTALS-MARK -p tcp -m comment --comment "ns/web:p nodePort" -m addrtype --dst-type LOCAL -m tcp --dport 30080 -m socket --transparent --nowildcard -j MARK --set-xmark 0x1000/0x1000
COMMIT
`

func TestRenderGolden(t *testing.T) {
	st := renderState()
	rc := testRC(renderConfig{family: v1.IPv4Protocol, listenIP: netip.IPv4Unspecified(),
		hostIP: netip.MustParseAddr("192.168.0.10"), local: proxier.LocalMatch{CIDR: netip.MustParsePrefix("10.244.0.0/16")}})
	got := string(render(rc, planFamily(st, v1.IPv4Protocol, false), renderPorts(v1.IPv4Protocol)))
	if d := cmp.Diff(strings.Split(renderGolden, "\n"), strings.Split(got, "\n")); d != "" {
		t.Errorf("render (-want +got):\n%s", d)
	}
}

// TestRenderVariants checks single rules of other configurations.
func TestRenderVariants(t *testing.T) {
	tests := []struct {
		name      string
		rc        renderConfig
		mod       func(*proxier.State)
		want, not []string
	}{{
		name: "listen IP: DNAT there from outside and from the node",
		rc:   testRC(renderConfig{family: v1.IPv4Protocol, listenIP: netip.MustParseAddr("10.0.0.5"), hostIP: netip.MustParseAddr("10.0.0.5")}),
		want: []string{
			`-A KUBE-PORTALS-CONTAINER -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j DNAT --to-destination 10.0.0.5:40001`,
			`-A KUBE-PORTALS-HOST -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP" -m tcp --dport 80 -j DNAT --to-destination 10.0.0.5:40001`,
		},
	}, {
		name: "no host IP: node traffic is REDIRECTed",
		rc:   testRC(renderConfig{family: v1.IPv4Protocol, listenIP: netip.IPv4Unspecified()}),
		want: []string{`-A KUBE-PORTALS-HOST -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP" -m tcp --dport 80 -j REDIRECT --to-ports 40001`},
	}, {
		name: "no cluster CIDR: pods are external clients",
		rc:   testRC(renderConfig{family: v1.IPv4Protocol, listenIP: netip.IPv4Unspecified()}),
		not:  []string{"from pods"},
	}, {
		name: "eTP=Local without local endpoints: external traffic dropped, pods and node still served",
		rc:   testRC(renderConfig{family: v1.IPv4Protocol, listenIP: netip.IPv4Unspecified(), local: proxier.LocalMatch{CIDR: netip.MustParsePrefix("10.244.0.0/16")}}),
		mod: func(st *proxier.State) {
			n := spName("web", v1.ProtocolTCP)
			st.Endpoints[n] = st.Endpoints[n][1:]
		},
		want: []string{
			`-A KUBE-PORTALS-FILTER -p tcp -m comment --comment "ns/web:p nodePort has no local endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DROP`,
			`-A KUBE-NODEPORT-CONTAINER -s 10.244.0.0/16 -p tcp -m comment --comment "ns/web:p nodePort from pods" -m tcp --dport 30080 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001`,
			`-A KUBE-NODEPORT-HOST -p tcp -m comment --comment "ns/web:p nodePort" -m tcp --dport 30080 -j REDIRECT --to-ports 40001`,
		},
		not: []string{"--to-ports 40002"},
	}, {
		name: "eTP=Local, node pod CIDR known: only this node's pods are short-circuited",
		rc: testRC(renderConfig{family: v1.IPv4Protocol, listenIP: netip.IPv4Unspecified(), local: proxier.LocalMatch{CIDR: netip.MustParsePrefix("10.244.0.0/16")},
			nodePods: netip.MustParsePrefix("10.244.1.0/24")}),
		mod: func(st *proxier.State) {
			n := spName("web", v1.ProtocolTCP)
			st.Endpoints[n] = st.Endpoints[n][1:]
		},
		want: []string{
			`-A KUBE-NODEPORT-CONTAINER -s 10.244.1.0/24 -p tcp -m comment --comment "ns/web:p nodePort from pods" -m tcp --dport 30080 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001`,
			`-A KUBE-PORTALS-FILTER -p tcp -m comment --comment "ns/web:p nodePort has no local endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DROP`,
		},
		not: []string{"-s 10.244.0.0/16"},
	}, {
		name: "InterfaceNamePrefix: pods are told by their input interface",
		rc:   testRC(renderConfig{family: v1.IPv4Protocol, listenIP: netip.IPv4Unspecified(), local: proxier.LocalMatch{Interface: "cali", Prefix: true}}),
		want: []string{
			`-A KUBE-NODEPORT-CONTAINER -i cali+ -p tcp -m comment --comment "ns/web:p nodePort from pods" -m tcp --dport 30080 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001`,
		},
		not: []string{"-s 10.244.0.0/16"},
	}, {
		name: "IPv6: only IPv6 addresses, /128",
		rc:   testRC(renderConfig{family: v1.IPv6Protocol, listenIP: netip.IPv6Unspecified(), hostIP: netip.MustParseAddr("2001:db8::10")}),
		mod: func(st *proxier.State) {
			sp := *st.Services[spName("web", v1.ProtocolTCP)]
			sp.ClusterIPs = append(sp.ClusterIPs, netip.MustParseAddr("fd00::10"))
			st.Services[sp.Name] = &sp
			st.Endpoints[sp.Name] = append(st.Endpoints[sp.Name], proxier.Endpoint{
				IP: netip.MustParseAddr("fd00:10:244:1::2"), Port: 8080, Ready: true, Serving: true, NodeName: "node-a", IsLocal: true})
		},
		want: []string{
			`-A KUBE-PORTALS-HOST -d fd00::10/128 -p tcp -m comment --comment "ns/web:p cluster IP" -m tcp --dport 80 -j DNAT --to-destination [2001:db8::10]:40001`,
			`-A KUBE-PORTALS-CONTAINER -d 2001:db8::99/128 -p tcp -m comment --comment "ns/web:p external IP" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40002`,
		},
		not: []string{"10.96.0.10", "192.0.2.10", "dns"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := renderState()
			if tc.mod != nil {
				tc.mod(st)
			}
			got := string(render(tc.rc, planFamily(st, tc.rc.family, tc.rc.local.ByInterface()), renderPorts(tc.rc.family)))
			lines := strings.Split(got, "\n")
			for _, w := range tc.want {
				if !contains(lines, w) {
					t.Errorf("missing rule %s\nin:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("unexpected %q in:\n%s", n, got)
				}
			}
		})
	}
}

// testRC adds the default marks.
func testRC(rc renderConfig) renderConfig {
	rc.mark, rc.masqMark, rc.fallback = 1<<DefaultMarkBit, 1<<DefaultMasqueradeBit, true
	return rc
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

func TestIntersect(t *testing.T) {
	p := netip.MustParsePrefix
	tests := []struct {
		a, b netip.Prefix
		want netip.Prefix
		ok   bool
	}{
		{netip.Prefix{}, p("10.244.0.0/16"), p("10.244.0.0/16"), true},
		{p("10.244.1.0/24"), p("10.244.0.0/16"), p("10.244.1.0/24"), true},
		{p("10.0.0.0/8"), p("10.244.0.0/16"), p("10.244.0.0/16"), true},
		{p("192.168.0.0/16"), p("10.244.0.0/16"), netip.Prefix{}, false},
		{p("10.0.0.0/8"), netip.Prefix{}, netip.Prefix{}, false},
	}
	for _, tc := range tests {
		if got, ok := intersect(tc.a, tc.b); got != tc.want || ok != tc.ok {
			t.Errorf("intersect(%v, %v) = %v, %v; want %v, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
		}
	}
}

// TestPlanSplitsByInterface: with an interface detector an
// externalTrafficPolicy Local port always gets an external socket of its
// own (the only one that dials from client addresses), even when both
// policies are Local; the "-i" rules keep pods off it.
func TestPlanSplitsByInterface(t *testing.T) {
	st := renderState()
	n := spName("web", v1.ProtocolTCP)
	sp := *st.Services[n]
	sp.InternalPolicyLocal, sp.ExternalPolicyLocal = true, true
	st.Services[n] = &sp
	for _, byIface := range []bool{false, true} {
		for _, p := range planFamily(st, v1.IPv4Protocol, byIface) {
			if p.sp.Name == n && p.split != byIface {
				t.Errorf("byIface=%v: iTP=eTP=Local port split=%v", byIface, p.split)
			}
		}
	}
}
