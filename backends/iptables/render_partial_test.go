package iptables

import (
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// cloneState copies the maps of a State (service ports and endpoint slices
// are replaced, never mutated, by the steps below).
func cloneState(st *proxier.State) *proxier.State {
	return &proxier.State{Services: maps.Clone(st.Services), Endpoints: maps.Clone(st.Endpoints), Node: st.Node}
}

// TestRenderPartialEqualsFull applies a sequence of changes and checks
// that re-rendering only the changed service ports gives exactly the full
// render, whether or not the Diff flags service changes.
func TestRenderPartialEqualsFull(t *testing.T) {
	a := svc("ns", "a", "http", v1.ProtocolTCP, 80, "10.96.1.1")
	b := with(svc("ns", "b", "http", v1.ProtocolTCP, 80, "10.96.1.2"), nodePort(30002))
	c := with(svc("ns", "c", "dns", v1.ProtocolUDP, 53, "10.96.1.3"), etpLocal(31003), lbIPs("198.51.100.3"))
	st := stateOf([]string{"192.168.1.10"}, []*proxier.ServicePort{a, b, c}, epMap{
		a.Name: {ep("10.244.1.1:80"), ep("10.244.2.1:80")},
		b.Name: {ep("10.244.1.2:80")},
		c.Name: {ep("10.244.1.3:53", local), ep("10.244.2.3:53")},
	})
	steps := []struct {
		name            string
		change          func(st *proxier.State) []proxier.ServicePortName
		servicesChanged bool
	}{
		{"add endpoint", func(st *proxier.State) []proxier.ServicePortName {
			st.Endpoints[a.Name] = append(slices.Clone(st.Endpoints[a.Name]), ep("10.244.3.1:80"))
			return []proxier.ServicePortName{a.Name}
		}, false},
		{"last endpoint gone", func(st *proxier.State) []proxier.ServicePortName {
			delete(st.Endpoints, b.Name)
			return []proxier.ServicePortName{b.Name}
		}, false},
		{"endpoint back", func(st *proxier.State) []proxier.ServicePortName {
			st.Endpoints[b.Name] = []proxier.Endpoint{ep("10.244.9.2:80")}
			return []proxier.ServicePortName{b.Name}
		}, false},
		{"local endpoint gone", func(st *proxier.State) []proxier.ServicePortName {
			st.Endpoints[c.Name] = []proxier.Endpoint{ep("10.244.2.3:53")}
			return []proxier.ServicePortName{c.Name}
		}, false},
		{"service deleted, diff not flagged", func(st *proxier.State) []proxier.ServicePortName {
			delete(st.Services, a.Name)
			delete(st.Endpoints, a.Name)
			return []proxier.ServicePortName{a.Name}
		}, false},
		{"service added", func(st *proxier.State) []proxier.ServicePortName {
			d := with(svc("ns", "d", "", v1.ProtocolSCTP, 9, "10.96.1.4"), externalIPs("192.0.2.4"))
			st.Services[d.Name] = d
			st.Endpoints[d.Name] = []proxier.Endpoint{ep("10.244.1.4:9")}
			return []proxier.ServicePortName{d.Name}
		}, true},
		{"nodeport changed", func(st *proxier.State) []proxier.ServicePortName {
			b2 := *st.Services[b.Name]
			b2.NodePort = 30022
			st.Services[b.Name] = &b2
			return []proxier.ServicePortName{b.Name}
		}, true},
	}
	fc := testConfig().forFamily(v1.IPv4Protocol)
	prev := render(fc, st)
	for _, step := range steps {
		st = cloneState(st)
		diff := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{}, ServicesChanged: step.servicesChanged}
		for _, n := range step.change(st) {
			diff.Changed[n] = struct{}{}
		}
		got := renderPartial(fc, st, diff, prev)
		want := render(fc, st)
		if d := cmp.Diff(want.String(), got.String()); d != "" {
			t.Fatalf("%s: partial render differs from full (-full +partial):\n%s", step.name, d)
		}
		prev = got
	}
}

// TestRenderOddInput feeds malformed service ports and endpoints: nothing
// may panic, bad entries are left out, good ones still render.
func TestRenderOddInput(t *testing.T) {
	good := svc("ns", "good", "http", v1.ProtocolTCP, 80, "10.96.2.1")
	noIP := svc("ns", "noip", "http", v1.ProtocolTCP, 80)
	zeroIP := &proxier.ServicePort{Name: spn("ns", "zero", "", v1.ProtocolTCP), Protocol: v1.ProtocolTCP, Port: 80,
		ClusterIPs: []netip.Addr{{}}, ExternalIPs: []netip.Addr{{}}, LoadBalancerIPs: []netip.Addr{{}},
		LoadBalancerSourceRanges: []netip.Prefix{{}}}
	badProto := svc("ns", "proto", "x", "ICMP", 80, "10.96.2.2")
	noPort := svc("ns", "noport", "x", v1.ProtocolTCP, 0, "10.96.2.3")
	mapped := with(svc("ns", "mapped", "x", v1.ProtocolUDP, 53, "::ffff:10.96.2.4"), externalIPs("::ffff:192.0.2.4"))
	v6only := svc("ns", "v6", "x", v1.ProtocolTCP, 80, "fd00::1")
	st := stateOf([]string{"192.168.1.10"}, []*proxier.ServicePort{good, noIP, zeroIP, badProto, noPort, mapped, v6only}, epMap{
		good.Name:                               {ep("10.244.1.1:80"), {IP: netip.Addr{}, Port: 80, Ready: true}},
		mapped.Name:                             {{IP: netip.MustParseAddr("::ffff:10.244.1.5"), Port: 53, Ready: true, Serving: true}},
		v6only.Name:                             {{IP: netip.Addr{}, Port: 80, Ready: true}, ep("[fd00:10:244::1]:0"), ep("[fd00:10:244::2]:80")},
		spn("ns", "orphan", "", v1.ProtocolTCP): {ep("10.244.1.9:1")},
	})
	st.Services[spn("ns", "nil", "", v1.ProtocolTCP)] = nil
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		rs := render(testConfig().forFamily(fam), st)
		checkRestoreText(t, rs.String())
		want := map[v1.IPFamily][]string{v1.IPv4Protocol: {"ns/good:http", "ns/mapped:x"}, v1.IPv6Protocol: {"ns/v6:x"}}[fam]
		var got []string
		for _, n := range rs.names {
			got = append(got, n.String())
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: rendered service ports (-want +got):\n%s", fam, d)
		}
	}
	if rs := render(testConfig().forFamily(v1.IPv6Protocol), st); rs.RuleCount("nat") == 0 ||
		len(rs.services[v6only.Name].chains) != 2 {
		t.Errorf("v6 service with one valid endpoint: want one SVC and one SEP chain, got %v", rs.String())
	}
	// A nil State renders the fixed chains only.
	checkRestoreText(t, render(testConfig().forFamily(v1.IPv4Protocol), nil).String())
}

// TestChainNamesMatchKubeProxy checks names from the recorded kube-proxy
// sample.
func TestChainNamesMatchKubeProxy(t *testing.T) {
	web := spn("default", "web", "http", v1.ProtocolTCP)
	dns := spn("default", "web", "dns", v1.ProtocolUDP)
	cases := map[string]string{
		chainsFor(web).cluster:                                             "KUBE-SVC-CDGGSHYLG3RE2FKL",
		chainsFor(web).external:                                            "KUBE-EXT-CDGGSHYLG3RE2FKL",
		chainsFor(dns).cluster:                                             "KUBE-SVC-3OI236ZBKTWAFB2I",
		endpointChainName(web, "10.244.0.11:8080"):                         "KUBE-SEP-QZSIC2ZS53EHPBVZ",
		endpointChainName(dns, "10.244.2.13:5353"):                         "KUBE-SEP-ORG4BZ23UCJOUGIG",
		chainsFor(spn("default", "demo2", "http", v1.ProtocolTCP)).cluster: "KUBE-SVC-ZBHPKJZFVML7CQSP",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("chain name %s, want %s", got, want)
		}
	}
}
