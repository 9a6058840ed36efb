package iptables

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// fakeCounterSets models hash:ip,port sets with counters and comments:
// strict about adding to a missing set, and printing `ipset save` lines.
type fakeCounterSets struct {
	sets     map[string]map[string]*counted // set -> member
	restores []string
}

func newFakeCounterSets() *fakeCounterSets {
	return &fakeCounterSets{sets: map[string]map[string]*counted{}}
}

func (f *fakeCounterSets) Restore(_ context.Context, data []byte) error {
	f.restores = append(f.restores, string(data))
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		w := strings.Fields(line)
		switch w[0] {
		case "create":
			if f.sets[w[1]] == nil {
				f.sets[w[1]] = map[string]*counted{}
			}
		case "add", "del":
			s := f.sets[w[1]]
			if s == nil {
				return fmt.Errorf("%s: the set with the given name does not exist", line)
			}
			if w[0] == "del" {
				delete(s, w[2])
				continue
			}
			m := parseCounted([]byte(line))[0]
			s[w[2]] = &m
		}
	}
	return nil
}

func (f *fakeCounterSets) Save(_ context.Context, set string) ([]byte, error) {
	s := f.sets[set]
	if s == nil {
		return nil, fmt.Errorf("the set with the given name does not exist")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "create %s hash:ip,port family inet hashsize 1024 maxelem 65536 counters comment\n", set)
	for _, k := range slices.Sorted(maps.Keys(s)) {
		fmt.Fprintf(&b, "add %s %s packets %d bytes %d comment %q\n", set, k, s[k].packets, s[k].bytes, s[k].comment)
	}
	return []byte(b.String()), nil
}

func TestServiceTrafficRulesAndSets(t *testing.T) {
	fake := iptablestest.NewFake()
	sets := newFakeCounterSets()
	b := newTestBackend(t, fake, func(c *Config) { c.ServiceTraffic, c.CounterSets = true, sets })
	web := svc("shop", "web", "http", v1.ProtocolTCP, 80, "10.96.0.10")
	web.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	web.NodePort = 30080
	dns := svc("kube-system", "dns", "", v1.ProtocolUDP, 53, "10.96.0.53")
	st := stateOf([]string{"10.0.0.1"}, []*proxier.ServicePort{web, dns}, epMap{web.Name: {ep("10.244.0.5:8080")}, dns.Name: {ep("10.244.0.5:53")}})
	mustSync(t, b, st, fullDiff())

	dump := fake.Dump(runner.IPv4, "mangle")
	for _, want := range []string{
		"-A PREROUTING -m comment --comment \"kubernetes service traffic counters\" -j KUBE-SERVICE-TRAFFIC",
		"-A OUTPUT -m comment --comment \"kubernetes service traffic counters\" -j KUBE-SERVICE-TRAFFIC",
		"-A KUBE-SERVICE-TRAFFIC -m comment --comment \"count service traffic\" -m set --match-set KUBE-SERVICE-TRAFFIC dst,dst",
		"-A KUBE-SERVICE-TRAFFIC -m comment --comment \"count service connections\" -m conntrack --ctstate NEW -m set --match-set KUBE-SERVICE-CONNS dst,dst",
		"-A KUBE-SERVICE-TRAFFIC ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j KUBE-NODEPORT-TRAFFIC",
		"-A KUBE-NODEPORT-TRAFFIC -m comment --comment \"count nodeport traffic\" -m set --match-set KUBE-NODEPORT-TRAFFIC dst,dst",
		"-A KUBE-NODEPORT-TRAFFIC -m comment --comment \"count nodeport connections\" -m conntrack --ctstate NEW -m set --match-set KUBE-NODEPORT-CONNS dst,dst",
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("mangle lacks %q:\n%s", want, dump)
		}
	}
	wantMembers := []string{"10.96.0.10,tcp:80", "10.96.0.53,udp:53", "192.0.2.10,tcp:80"}
	if got := slices.Sorted(maps.Keys(sets.sets["KUBE-SERVICE-CONNS"])); !slices.Equal(got, wantMembers) {
		t.Errorf("members %v, want %v", got, wantMembers)
	}
	wantNodePorts := []string{"0.0.0.0/1,tcp:30080", "128.0.0.0/1,tcp:30080"}
	if got := slices.Sorted(maps.Keys(sets.sets["KUBE-NODEPORT-TRAFFIC"])); !slices.Equal(got, wantNodePorts) {
		t.Errorf("NodePort members %v, want %v", got, wantNodePorts)
	}

	// The kernel counts; the scrape reads it, the external IP's counts
	// added to the cluster IP's.
	sets.sets["KUBE-SERVICE-TRAFFIC"]["10.96.0.10,tcp:80"].packets = 10
	sets.sets["KUBE-SERVICE-TRAFFIC"]["192.0.2.10,tcp:80"].bytes = 700
	sets.sets["KUBE-SERVICE-CONNS"]["192.0.2.10,tcp:80"].packets = 3
	sets.sets["KUBE-NODEPORT-TRAFFIC"]["128.0.0.0/1,tcp:30080"].packets = 5
	sets.sets["KUBE-NODEPORT-TRAFFIC"]["0.0.0.0/1,tcp:30080"].bytes = 300
	sets.sets["KUBE-NODEPORT-CONNS"]["0.0.0.0/1,tcp:30080"].packets = 2
	got, err := b.ServiceTraffic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []metrics.ServiceTrafficSample{
		{Namespace: "shop", Service: "web", Port: "http", Protocol: "TCP", Family: "IPv4", Connections: 5, Packets: 15, Bytes: 1000},
		{Namespace: "kube-system", Service: "dns", Port: "53", Protocol: "UDP", Family: "IPv4"},
	}
	if d := cmp.Diff(want, metrics.SumServiceTraffic(got)); d != "" {
		t.Errorf("samples (-want +got):\n%s", d)
	}

	// Nothing changed: no ipset call. The Service goes: its members go,
	// the others keep their counts.
	n := len(sets.restores)
	mustSync(t, b, st, changedDiff(false, web.Name))
	if len(sets.restores) != n {
		t.Errorf("a sync without service changes restored ipsets: %q", sets.restores[n:])
	}
	delete(st.Services, web.Name)
	delete(st.Endpoints, web.Name)
	mustSync(t, b, st, changedDiff(true, web.Name))
	got, _ = b.ServiceTraffic(context.Background())
	if len(got) != 1 || got[0].Service != "dns" {
		t.Errorf("after web went: %+v, want dns alone", got)
	}
}

// TestNodePortTrafficDsts: the NodePort counters enter under the nat
// jump's conditions, each address once: a prefix inside another (or the
// same twice) is dropped, loopback only with localhost NodePorts.
func TestNodePortTrafficDsts(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	for _, c := range []struct {
		fc   familyConfig
		want []string
	}{
		{familyConfig{family: v1.IPv4Protocol}, []string{"! -d 127.0.0.0/8"}},
		{familyConfig{family: v1.IPv4Protocol, localhostNodePorts: true}, []string{""}},
		{familyConfig{family: v1.IPv6Protocol}, []string{"! -d ::1/128"}},
		{familyConfig{family: v1.IPv4Protocol, nodePortAddresses: pp("10.0.0.0/8", "10.1.0.0/16", "192.168.0.0/16", "127.0.0.1/32", "192.168.0.0/16")},
			[]string{"-d 10.0.0.0/8", "-d 192.168.0.0/16"}},
		{familyConfig{family: v1.IPv4Protocol, localhostNodePorts: true, nodePortAddresses: pp("10.1.0.0/16", "127.0.0.1/32")},
			[]string{"-d 10.1.0.0/16", "-d 127.0.0.1/32"}},
	} {
		if got := nodePortTrafficDsts(&c.fc); !slices.Equal(got, c.want) {
			t.Errorf("%+v: %q, want %q", c.fc, got, c.want)
		}
	}
}
