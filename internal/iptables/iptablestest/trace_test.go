package iptablestest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// traceRules is a small kube-proxy-shaped ruleset: pod CIDR 10.244.0.0/16,
// node IP 192.168.0.10.
const traceRules = `
*filter
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
-A INPUT -m conntrack --ctstate NEW -j KUBE-EXTERNAL-SERVICES
-A FORWARD -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -j KUBE-EXTERNAL-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -j KUBE-SERVICES
-A KUBE-FORWARD -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-SERVICES -d 10.96.0.60/32 -p tcp -m comment --comment "ns/empty has no endpoints" -m tcp --dport 80 -j REJECT
-A KUBE-EXTERNAL-SERVICES -m addrtype --dst-type LOCAL -p tcp -m comment --comment "ns/local has no local endpoints" -m tcp --dport 30040 -j DROP
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-WEB - [0:0]
:KUBE-EXT-WEB - [0:0]
:KUBE-SEP-1 - [0:0]
:KUBE-SEP-2 - [0:0]
:KUBE-SEP-3 - [0:0]
:KUBE-SVC-STICKY - [0:0]
:KUBE-SEP-S1 - [0:0]
:KUBE-SEP-S2 - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-WEB
-A KUBE-SERVICES -d 10.96.0.80/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-STICKY
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j KUBE-EXT-WEB
-A KUBE-EXT-WEB -j KUBE-MARK-MASQ
-A KUBE-EXT-WEB -j KUBE-SVC-WEB
-A KUBE-SVC-WEB -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-1
-A KUBE-SVC-WEB -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-2
-A KUBE-SVC-WEB -j KUBE-SEP-3
-A KUBE-SEP-1 -s 10.244.1.2/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-1 -p tcp -m tcp -j DNAT --to-destination 10.244.1.2:8080
-A KUBE-SEP-2 -s 10.244.2.3/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-2 -p tcp -m tcp -j DNAT --to-destination 10.244.2.3:8080
-A KUBE-SEP-3 -s 10.244.2.4/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-3 -p tcp -m tcp -j DNAT --to-destination 10.244.2.4:8080
-A KUBE-SVC-STICKY -m recent --name KUBE-SEP-S2 --mask 255.255.255.255 --rsource --rcheck --seconds 10800 --reap -j KUBE-SEP-S2
-A KUBE-SVC-STICKY -j KUBE-SEP-S1
-A KUBE-SEP-S1 -p tcp -m recent --set --name KUBE-SEP-S1 --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.1.81:8080
-A KUBE-SEP-S2 -p tcp -m recent --set --name KUBE-SEP-S2 --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.244.2.82:8080
COMMIT
`

var (
	nodeIP   = netip.MustParseAddr("192.168.0.10")
	podIP    = netip.MustParseAddr("10.244.1.99")
	outsider = netip.MustParseAddr("203.0.113.7")
	webEPs   = []string{"10.244.1.2:8080", "10.244.2.3:8080", "10.244.2.4:8080"}
)

func traceFake(t *testing.T) *Fake {
	t.Helper()
	f := NewFake()
	mustRestore(t, f, runner.IPv4, strings.TrimPrefix(traceRules, "\n"))
	return f
}

func TestTrace(t *testing.T) {
	f := traceFake(t)
	tests := []struct {
		name string
		pkt  Packet
		want TraceResult
	}{
		{"pod to cluster IP reaches every endpoint unmasqueraded",
			Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 80}, TraceResult{Endpoints: webEPs}},
		{"outsider to cluster IP is masqueraded",
			Packet{SrcIP: outsider, DstIP: ip("10.96.0.10"), DstPort: 80}, TraceResult{Endpoints: webEPs, Masquerade: true}},
		{"node to cluster IP goes through nat OUTPUT",
			Packet{SrcIP: nodeIP, DstIP: ip("10.96.0.10"), DstPort: 80, Local: true}, TraceResult{Endpoints: webEPs, Masquerade: true}},
		{"outsider to NodePort",
			Packet{SrcIP: outsider, DstIP: nodeIP, DstPort: 30080}, TraceResult{Endpoints: webEPs, Masquerade: true}},
		{"NodePort on a non-local address does not match",
			Packet{SrcIP: outsider, DstIP: ip("192.168.0.11"), DstPort: 30080}, TraceResult{}},
		{"wrong port matches nothing",
			Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 81}, TraceResult{}},
		{"udp does not match tcp rules",
			Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 80, Protocol: "UDP"}, TraceResult{}},
		{"hairpin: an endpoint reaching itself is masqueraded on that path only",
			Packet{SrcIP: ip("10.244.1.2"), DstIP: ip("10.96.0.10"), DstPort: 80}, TraceResult{Endpoints: webEPs, Masquerade: true}},
		{"no endpoints: filter REJECT",
			Packet{SrcIP: podIP, DstIP: ip("10.96.0.60"), DstPort: 80}, TraceResult{Rejected: true}},
		{"no local endpoints: external DROP in filter INPUT",
			Packet{SrcIP: outsider, DstIP: nodeIP, DstPort: 30040}, TraceResult{Dropped: true}},
		{"affinity: a new client takes the normal path",
			Packet{SrcIP: podIP, DstIP: ip("10.96.0.80"), DstPort: 80}, TraceResult{Endpoints: []string{"10.244.1.81:8080"}}},
		{"affinity: a known client may also be sent back to its endpoint",
			Packet{SrcIP: podIP, DstIP: ip("10.96.0.80"), DstPort: 80, RecentMayMatch: true},
			TraceResult{Endpoints: []string{"10.244.1.81:8080", "10.244.2.82:8080"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.pkt.NodeIPs = []netip.Addr{nodeIP}
			got, err := f.Trace(runner.IPv4, tc.pkt)
			if err != nil {
				t.Fatalf("Trace: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(TraceResult{}, "Paths"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Trace (-want +got):\n%s\npaths: %+v", diff, got.Paths)
			}
		})
	}
}

func TestTracePathsRecordStateAndRules(t *testing.T) {
	f := traceFake(t)
	got, err := f.Trace(runner.IPv4, Packet{SrcIP: ip("10.244.1.2"), DstIP: ip("10.96.0.10"), DstPort: 80, NodeIPs: []netip.Addr{nodeIP}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Paths) != 3 {
		t.Fatalf("got %d paths, want one per endpoint: %+v", len(got.Paths), got.Paths)
	}
	// Only the path that lands on the client itself is masqueraded; the
	// KUBE-POSTROUTING xor clears the mark again.
	for _, p := range got.Paths {
		if want := p.DNAT == "10.244.1.2:8080"; p.Masquerade != want || p.Verdict != "ACCEPT" || p.Mark != 0 {
			t.Errorf("path %+v: want masquerade %v, ACCEPT, mark 0", p, want)
		}
	}
	first := got.Paths[0].Rules
	if len(first) == 0 || first[0] != `nat: -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES` {
		t.Errorf("rules of the first path: %q", first)
	}
}

func TestTraceSemantics(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		pkt   Packet
		want  TraceResult
	}{
		{"DNAT rewrites the destination later hooks see",
			"*nat\n-A PREROUTING -p tcp -j DNAT --to-destination 10.1.0.1:81\nCOMMIT\n*filter\n" +
				"-A FORWARD -d 10.9.9.9/32 -j DROP\n-A FORWARD -m conntrack ! --ctstate DNAT -j DROP\n" +
				"-A FORWARD -p tcp -m tcp --dport 81 -j REJECT\nCOMMIT\n",
			Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("10.9.9.9"), DstPort: 80}, TraceResult{Rejected: true}},
		{"DNAT without a port keeps the port",
			"*nat\n-A PREROUTING -j DNAT --to-destination 10.1.0.1\nCOMMIT\n",
			Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("10.9.9.9"), DstPort: 80}, TraceResult{Endpoints: []string{"10.1.0.1:80"}}},
		{"goto: RETURN goes back past the chain that did the goto",
			"*nat\n:A - [0:0]\n:B - [0:0]\n-A B -j RETURN\n-A A -g B\n-A A -j DNAT -p tcp --to-destination 10.1.0.1:1\n" +
				"-A PREROUTING -j A\n-A PREROUTING -p tcp -j DNAT --to-destination 10.1.0.2:2\nCOMMIT\n",
			Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("10.9.9.9"), DstPort: 80}, TraceResult{Endpoints: []string{"10.1.0.2:2"}}},
		{"filter policy DROP",
			"*filter\n:FORWARD DROP [0:0]\nCOMMIT\n",
			Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("10.9.9.9"), DstPort: 80}, TraceResult{Dropped: true}},
		{"local destination goes to INPUT, not FORWARD",
			"*filter\n:FORWARD DROP [0:0]\n-A INPUT -s 10.0.0.1/32 -j ACCEPT\nCOMMIT\n",
			Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("127.0.0.1"), DstPort: 80}, TraceResult{}},
		{"set-xmark then mark match",
			"*nat\n-A PREROUTING -j MARK --set-xmark 0x4000/0x4000\n-A PREROUTING -m mark --mark 0x4000/0x4000 -p udp -j DNAT --to-destination 10.1.0.1:53\nCOMMIT\n",
			Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("10.9.9.9"), DstPort: 53, Protocol: "udp"}, TraceResult{Endpoints: []string{"10.1.0.1:53"}}},
		{"IPv6 DNAT",
			"*nat\n-A PREROUTING -d fd00::1/128 -p tcp -j DNAT --to-destination [fd00:1::2]:8080\nCOMMIT\n",
			Packet{SrcIP: ip("fd00::9"), DstIP: ip("fd00::1"), DstPort: 80}, TraceResult{Endpoints: []string{"[fd00:1::2]:8080"}}},
		{"REDIRECT of an arriving packet: to the node's address, then INPUT",
			"*nat\n-A PREROUTING -d 10.96.0.10/32 -p tcp -j REDIRECT --to-ports 41000\nCOMMIT\n*filter\n" +
				"-A INPUT -d 10.96.0.10/32 -j DROP\n-A INPUT -p tcp -m tcp --dport 41000 -m addrtype --dst-type LOCAL -j ACCEPT\nCOMMIT\n",
			Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("10.96.0.10"), DstPort: 80}, TraceResult{Endpoints: []string{"192.168.0.10:41000"}}},
		{"REDIRECT of the node's own packet: to loopback",
			"*nat\n-A OUTPUT -p udp -j REDIRECT --to-ports 41001\nCOMMIT\n",
			Packet{SrcIP: ip("192.168.0.10"), DstIP: ip("10.96.0.10"), DstPort: 53, Protocol: "udp", Local: true}, TraceResult{Endpoints: []string{"127.0.0.1:41001"}}},
		{"multiport and src-type",
			"*nat\n-A OUTPUT -m addrtype --src-type LOCAL -p tcp -m multiport --dports 70,80:90 -j DNAT --to-destination 10.1.0.1:1\nCOMMIT\n",
			Packet{SrcIP: ip("192.168.0.10"), DstIP: ip("10.9.9.9"), DstPort: 85, Local: true}, TraceResult{Endpoints: []string{"10.1.0.1:1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fam := runner.IPv4
			if tc.pkt.DstIP.Is6() {
				fam = runner.IPv6
			}
			f := NewFake()
			mustRestore(t, f, fam, tc.rules)
			tc.pkt.NodeIPs = []netip.Addr{nodeIP}
			got, err := f.Trace(fam, tc.pkt)
			if err != nil {
				t.Fatalf("Trace: %v", err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(TraceResult{}, "Paths"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Trace (-want +got):\n%s\npaths: %+v", diff, got.Paths)
			}
		})
	}
}

func TestTraceRefusesWhatItDoesNotModel(t *testing.T) {
	tests := []struct{ name, rules, wantErr string }{
		{"ipset", "*nat\n-A PREROUTING -m set --match-set KUBE-X dst -j RETURN\nCOMMIT\n", "ipset"},
		{"unknown module", "*nat\n-A PREROUTING -m physdev --physdev-is-bridged -j RETURN\nCOMMIT\n", "physdev"},
		{"unknown target", "*nat\n-A PREROUTING -j CONNMARK --set-mark 1\nCOMMIT\n", "CONNMARK"},
		{"interface without packet interface", "*nat\n-A PREROUTING -i eth0 -j RETURN\nCOMMIT\n", "interface"},
		{"addrtype other than LOCAL", "*nat\n-A PREROUTING -m addrtype --dst-type UNICAST -j RETURN\nCOMMIT\n", "UNICAST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			mustRestore(t, f, runner.IPv4, tc.rules)
			_, err := f.Trace(runner.IPv4, Packet{SrcIP: podIP, DstIP: ip("10.96.0.10"), DstPort: 80})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Trace error = %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
	f := NewFake()
	if _, err := f.Trace(runner.IPv4, Packet{SrcIP: ip("fd00::1"), DstIP: ip("10.96.0.10")}); err == nil {
		t.Errorf("Trace accepted an IPv6 source for an IPv4 trace")
	}
}

// TestTraceRedirectMarksThePath: a REDIRECTed path says so, and
// RedirectAddr stands for the input interface's address.
func TestTraceRedirectMarksThePath(t *testing.T) {
	f := NewFake()
	mustRestore(t, f, runner.IPv4, "*nat\n-A PREROUTING -p tcp -j REDIRECT --to-ports 41000\nCOMMIT\n")
	got, err := f.Trace(runner.IPv4, Packet{SrcIP: ip("10.0.0.1"), DstIP: ip("10.96.0.10"), DstPort: 80,
		NodeIPs: []netip.Addr{nodeIP}, RedirectAddr: ip("10.244.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Paths[0]; len(got.Paths) != 1 || !p.Redirect || p.DNAT != "10.244.0.1:41000" {
		t.Errorf("paths %+v", got.Paths)
	}
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestTraceProbabilities: the statistic draws of KUBE-SVC-WEB give each
// endpoint a third of the new connections, and the paths add up to one.
func TestTraceProbabilities(t *testing.T) {
	f := traceFake(t)
	res, err := f.Trace(runner.IPv4, Packet{SrcIP: podIP, DstIP: netip.MustParseAddr("10.96.0.10"), DstPort: 80, NodeIPs: []netip.Addr{nodeIP}})
	if err != nil {
		t.Fatal(err)
	}
	total, per := 0.0, map[string]float64{}
	for _, p := range res.Paths {
		total += p.Probability
		per[p.DNAT] += p.Probability
	}
	if d := total - 1; d > 1e-9 || d < -1e-9 {
		t.Errorf("paths add up to %v, want 1", total)
	}
	for _, ep := range webEPs {
		if d := per[ep] - 1.0/3; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: probability %v, want 1/3", ep, per[ep])
		}
	}
}
