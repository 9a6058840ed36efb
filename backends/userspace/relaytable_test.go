package userspace

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// TestRelayTable: every proxy socket is listed with its port, its
// endpoints and its affinity, and the JSON served reads back the same.
func TestRelayTable(t *testing.T) {
	env := newTestEnv(t)
	st := newState()
	web := spName("web", v1.ProtocolTCP)
	sp := addService(st, web, "10.96.0.10", 80, netip.MustParseAddrPort("10.244.1.3:8080"), netip.MustParseAddrPort("10.244.1.2:8080"))
	sp.AffinityTimeoutSeconds = 600
	dns := spName("dns", v1.ProtocolUDP)
	addService(st, dns, "10.96.0.53", 53)
	env.sync(t, st)

	webPort, _ := env.b.ProxyPort(web, v1.IPv4Protocol, false)
	dnsPort, _ := env.b.ProxyPort(dns, v1.IPv4Protocol, false)
	want := RelayTable{Relays: []Relay{
		{Namespace: "ns", Name: "dns", Port: "p", Protocol: v1.ProtocolUDP, Family: v1.IPv4Protocol, Traffic: "internal",
			Listen: netip.AddrPortFrom(netip.IPv4Unspecified(), dnsPort), Balancing: "round-robin", Endpoints: []netip.AddrPort{}},
		{Namespace: "ns", Name: "web", Port: "p", Protocol: v1.ProtocolTCP, Family: v1.IPv4Protocol, Traffic: "internal",
			Listen: netip.AddrPortFrom(netip.IPv4Unspecified(), webPort), Balancing: "round-robin",
			Endpoints:       []netip.AddrPort{netip.MustParseAddrPort("10.244.1.2:8080"), netip.MustParseAddrPort("10.244.1.3:8080")},
			AffinitySeconds: 600},
	}}
	if diff := cmp.Diff(want, env.b.RelayTable(), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("RelayTable (-want +got):\n%s", diff)
	}

	srv := httptest.NewServer(RelayTableHandler(env.b.RelayTable))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got RelayTable
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("served table (-want +got):\n%s", diff)
	}
	post, err := http.Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s", post.Status)
	}
}

// TestRelayTransparencyFrom: the served transparency answers as the
// socket's own does.
func TestRelayTransparencyFrom(t *testing.T) {
	ep := netip.MustParseAddrPort("10.244.1.2:8080")
	rt := relayTransparency(&transparency{local: map[netip.AddrPort]bool{ep: true}, inside: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}})
	for _, tc := range []struct {
		client string
		ep     netip.AddrPort
		want   bool
	}{
		{"203.0.113.1", ep, true},
		{"10.244.2.9", ep, false},
		{"203.0.113.1", netip.MustParseAddrPort("10.244.9.9:8080"), false},
	} {
		if got := rt.From(netip.MustParseAddr(tc.client), tc.ep); got != tc.want {
			t.Errorf("From(%s, %s) = %v", tc.client, tc.ep, got)
		}
	}
	if (*RelayTransparency)(nil).From(netip.MustParseAddr("203.0.113.1"), ep) {
		t.Errorf("nil transparency keeps client addresses")
	}
}
