package nftables_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

func trafficBackend(t *testing.T, fake *nftablestest.Fake) *nftables.Backend {
	t.Helper()
	b, err := nftables.New(nftables.Config{Conn: fake, ServiceTraffic: true})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countedState: web:http (cluster IP and an external IP) and dns (an
// unnamed UDP port, labelled by its number).
func countedState() *proxier.State {
	web := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP}
	dns := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "kube-system", Name: "dns"}, Protocol: v1.ProtocolUDP}
	ep := []proxier.Endpoint{{IP: netip.MustParseAddr("10.244.0.5"), Port: 8080, Ready: true, Serving: true}}
	return &proxier.State{
		Services: map[proxier.ServicePortName]*proxier.ServicePort{
			web: {Name: web, Protocol: v1.ProtocolTCP, Port: 80, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
				ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}},
			dns: {Name: dns, Protocol: v1.ProtocolUDP, Port: 53, ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.53")}},
		},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{web: ep, dns: ep},
	}
}

func dstKey(ip string, proto uint8, port uint32) []ruleset.Value {
	return []ruleset.Value{{Addr: netip.MustParseAddr(ip)}, {Num: uint32(proto)}, {Num: port}}
}

func TestServiceTrafficRender(t *testing.T) {
	fake := nftablestest.NewFake()
	mustSync(t, trafficBackend(t, fake), countedState(), fullDiff())
	dump := fake.Dump(ruleset.IPv4, nftables.TableName)
	for _, want := range []string{
		"set service-traffic {\n\t\ttype ipv4_addr . inet_proto . inet_service\n\t\tcounter\n",
		`elements = { 10.96.0.10 . tcp . 80 comment "shop/web:http",` + "\n\t\t\t     " +
			`10.96.0.53 . udp . 53 comment "kube-system/dns:53",` + "\n\t\t\t     " +
			`192.0.2.10 . tcp . 80 comment "shop/web:http" }`,
		"ip daddr . meta l4proto . th dport @service-traffic comment \"count service traffic\"",
		"ct state new ip daddr . meta l4proto . th dport @service-connections comment \"count service connections\"",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("dump lacks %q:\n%s", want, dump)
		}
	}
	// Off by default: nothing of it.
	off := nftablestest.NewFake()
	plain, err := nftables.New(nftables.Config{Conn: off})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, plain, countedState(), fullDiff())
	if d := off.Dump(ruleset.IPv4, nftables.TableName); strings.Contains(d, "service-traffic") || strings.Contains(d, "counter") {
		t.Errorf("counters rendered without ServiceTraffic:\n%s", d)
	}
}

func TestServiceTrafficReadAndGone(t *testing.T) {
	fake := nftablestest.NewFake()
	b := trafficBackend(t, fake)
	st := countedState()
	mustSync(t, b, st, fullDiff())
	count := func(set string, key []ruleset.Value, p, by uint64) {
		t.Helper()
		if err := fake.CountTraffic(ruleset.IPv4, nftables.TableName, set, key, p, by); err != nil {
			t.Fatal(err)
		}
	}
	count("service-traffic", dstKey("10.96.0.10", 6, 80), 10, 1000)
	count("service-traffic", dstKey("192.0.2.10", 6, 80), 5, 500)
	count("service-connections", dstKey("10.96.0.10", 6, 80), 2, 120)
	count("service-connections", dstKey("192.0.2.10", 6, 80), 1, 60)
	want := []metrics.ServiceTrafficSample{
		{Namespace: "kube-system", Service: "dns", Port: "53", Protocol: "UDP", Family: "IPv4"},
		{Namespace: "shop", Service: "web", Port: "http", Protocol: "TCP", Family: "IPv4", Connections: 3, Packets: 15, Bytes: 1500},
	}
	if diff := cmp.Diff(want, readTraffic(t, b)); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	// An endpoint change of web is element changes of its endpoint map
	// only: its counters keep counting.
	moved := cloneState(st)
	web := sortedPorts(st)[1]
	moved.Endpoints[web] = []proxier.Endpoint{{IP: netip.MustParseAddr("10.244.0.6"), Port: 8080, Ready: true, Serving: true}}
	mustSync(t, b, moved, changedDiff(web))
	if got := readTraffic(t, b); len(got) != 2 || got[1].Packets != 15 {
		t.Errorf("after an endpoint change: %+v, want web's 15 packets kept", got)
	}
	// The Service goes: so do its series.
	gone := cloneState(moved)
	delete(gone.Services, web)
	delete(gone.Endpoints, web)
	mustSync(t, b, gone, changedDiff(web))
	if got := readTraffic(t, b); len(got) != 1 || got[0].Service != "dns" {
		t.Errorf("after web went: %+v, want dns alone", got)
	}
}

func readTraffic(t *testing.T, b *nftables.Backend) []metrics.ServiceTrafficSample {
	t.Helper()
	got, err := b.ServiceTraffic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got = metrics.SumServiceTraffic(got)
	slicesSortSamples(got)
	return got
}

func slicesSortSamples(s []metrics.ServiceTrafficSample) {
	slices.SortFunc(s, func(a, b metrics.ServiceTrafficSample) int {
		return strings.Compare(a.Namespace+"/"+a.Service, b.Namespace+"/"+b.Service)
	})
}
