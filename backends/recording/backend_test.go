package recording

import (
	"context"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/proxier"
)

func portName(name string) proxier.ServicePortName {
	return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Port: "http", Protocol: v1.ProtocolTCP}
}

func servicePort(name string) *proxier.ServicePort {
	return &proxier.ServicePort{Name: portName(name), Protocol: v1.ProtocolTCP, Port: 80,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")}}
}

func endpoint(ip string, ready bool) proxier.Endpoint {
	return proxier.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: ready, Serving: ready}
}

func TestSyncSelectsAndReports(t *testing.T) {
	var got []Sync
	b := New(nil, func(s Sync) { got = append(got, s) })
	a, c := portName("a"), portName("c")
	st := &proxier.State{
		Services: map[proxier.ServicePortName]*proxier.ServicePort{a: servicePort("a"), c: servicePort("c")},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{
			a: {endpoint("10.0.0.1", true), endpoint("10.0.0.2", false)},
			c: {endpoint("10.0.0.3", true), endpoint("fd00::3", true)},
		},
	}
	if _, err := b.Sync(context.Background(), st, &proxier.Diff{Full: true}); err != nil {
		t.Fatal(err)
	}
	// Not-ready endpoints and the other family are not selected.
	if n, ok := b.Selected(a); !ok || n != 1 {
		t.Errorf("a after the full sync: %d, %v; want 1 selected", n, ok)
	}
	if len(got) != 1 || !got[0].Full || got[0].Changed != 2 || got[0].Names != nil || got[0].Services != 2 || got[0].Endpoints != 2 {
		t.Errorf("full sync record: %+v", got)
	}

	// a gains a ready endpoint, c is deleted.
	st.Endpoints[a] = append(st.Endpoints[a], endpoint("10.0.0.4", true))
	delete(st.Services, c)
	delete(st.Endpoints, c)
	diff := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{a: {}, c: {}}}
	if _, err := b.Sync(context.Background(), st, diff); err != nil {
		t.Fatal(err)
	}
	if n, _ := b.Selected(a); n != 2 {
		t.Errorf("a after the change: %d selected, want 2", n)
	}
	if _, ok := b.Selected(c); ok {
		t.Error("c is still held after its deletion")
	}
	last := got[len(got)-1]
	if last.Full || last.Changed != 2 || len(last.Names) != 2 || last.Names[0] != "ns/a:http" || last.Names[1] != "ns/c:http" {
		t.Errorf("partial sync record: %+v", last)
	}
	if last.Services != 1 || last.Endpoints != 2 || last.At.IsZero() {
		t.Errorf("partial sync record counts: %+v", last)
	}
	if b.Syncs() != 2 {
		t.Errorf("Syncs() = %d, want 2", b.Syncs())
	}
}

func TestDualStackAndExternalSelections(t *testing.T) {
	b := New([]v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, nil)
	a := portName("a")
	sp := servicePort("a")
	sp.NodePort = 30080
	st := &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{a: sp},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{a: {endpoint("10.0.0.1", true), endpoint("fd00::1", true)}},
	}
	if _, err := b.Sync(context.Background(), st, &proxier.Diff{Full: true}); err != nil {
		t.Fatal(err)
	}
	// Internal and external selections, one endpoint each, in two families.
	if n, _ := b.Selected(a); n != 4 {
		t.Errorf("selected %d, want 4", n)
	}
	if err := b.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Selected(a); ok {
		t.Error("Cleanup kept a")
	}
}

func TestManyChangesAreCountedNotNamed(t *testing.T) {
	var got Sync
	b := New(nil, func(s Sync) { got = s })
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{}, Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{}}
	diff := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{}}
	for i := range maxNamed + 1 {
		n := portName(string(rune('a' + i)))
		st.Services[n] = servicePort(n.Name)
		diff.Changed[n] = struct{}{}
	}
	if _, err := b.Sync(context.Background(), st, diff); err != nil {
		t.Fatal(err)
	}
	if got.Changed != maxNamed+1 || got.Names != nil || got.Services != maxNamed+1 || got.Endpoints != 0 {
		t.Errorf("record: %+v", got)
	}
}
