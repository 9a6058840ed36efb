package explain

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
)

// TestUserspaceListenerGone: the rules send the cluster IP to a port no
// socket listens on (the daemon is gone): explain says the node refuses
// it, and that differs from the API.
func TestUserspaceListenerGone(t *testing.T) {
	o := objects(webService(), slice("web-1", eps(2, "node-b")))
	us := syncUserspace(t, o)
	us.sockets = SocketTable{}
	rep := Build(o, us.plane(t, o, fakeRelays{table: us.relays}), noIface)
	c := rep.Ports[0].Checks[0]
	if c.OK() || c.Refused < 0.999 || len(c.Missing) != 2 {
		t.Errorf("%+v", c)
	}
	if out := text(rep, false); !strings.Contains(out, "where no socket listens: the node refuses it") {
		t.Errorf("output:\n%s", out)
	}
}

// TestUserspaceRelayTableUnreachable: without the daemon's table the
// endpoints are unknown: the check cannot be traced, and fails.
func TestUserspaceRelayTableUnreachable(t *testing.T) {
	o := objects(webService(), slice("web-1", eps(2, "node-b")))
	us := syncUserspace(t, o)
	rep := Build(o, us.plane(t, o, fakeRelays{err: context.DeadlineExceeded}), noIface)
	c := rep.Ports[0].Checks[0]
	if c.OK() || c.Err == nil || !strings.Contains(c.Err.Error(), "whose endpoints only the daemon knows") {
		t.Errorf("%+v", c)
	}
	if out := text(rep, false); !strings.Contains(out, "cannot trace") || strings.Contains(out, "->") {
		t.Errorf("output:\n%s", out)
	}
}

// TestUserspaceRelayWithoutEndpoints: a proxy socket whose endpoints
// are gone closes connections; explain counts them refused.
func TestUserspaceRelayWithoutEndpoints(t *testing.T) {
	o := objects(webService(), slice("web-1", eps(1, "node-b")))
	us := syncUserspace(t, o)
	for i := range us.relays.Relays {
		us.relays.Relays[i].Endpoints = nil
	}
	rep := Build(o, us.plane(t, o, fakeRelays{table: us.relays}), noIface)
	c := rep.Ports[0].Checks[0]
	if c.OK() || c.Refused < 0.999 || !strings.Contains(strings.Join(c.Notes, "\n"), "has no endpoint: it closes connections at once") {
		t.Errorf("%+v", c)
	}
}

// TestUserspaceSentinels: with --userspace-restart-fallback, traffic
// from outside reaches the proxy while a sentinel holds the service
// address, and the kernel fallback's random DNAT without one.
func TestUserspaceSentinels(t *testing.T) {
	svc := webService(func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalIPs = []string{"192.0.2.7"}
	})
	o := objects(svc, slice("web-1", eps(2, "node-b")))
	us := syncUserspace(t, o, func(c *userspace.Config) { c.RestartFallback = true })
	rules, err := ReadIPTables(context.Background(), "userspace", us.fake, o.Families, nil, []netip.Addr{testNodeIP})
	if err != nil {
		t.Fatal(err)
	}
	mark := uint32(1) << userspace.DefaultMarkBit
	with := us.sockets
	with[v1.ProtocolTCP] = append(with[v1.ProtocolTCP], netip.MustParseAddrPort("192.0.2.7:80"))
	for _, tc := range []struct {
		name    string
		sockets SocketTable
		relayed bool
	}{{"sentinel", with, true}, {"no sentinel", SocketTable{v1.ProtocolTCP: us.sockets[v1.ProtocolTCP][:1]}, false}} {
		dp := ReadUserspace(context.Background(), UserspaceConfig{Rules: rules, Listeners: tc.sockets, Relays: fakeRelays{table: us.relays}, SentinelMark: mark})
		rep := Build(o, dp, noIface)
		c := rep.Ports[0].Checks[2]
		if c.Kind != KindExternalIP || !c.OK() || len(c.Reached) != 2 || c.Reached[0].Relayed != tc.relayed {
			t.Errorf("%s: %+v\n%s", tc.name, c, text(rep, true))
		}
		if fallback := strings.Contains(strings.Join(c.Notes, "\n"), "kernel fallback DNATs it"); fallback == tc.relayed {
			t.Errorf("%s: output:\n%s", tc.name, text(rep, false))
		}
	}
}

func TestParseSockets(t *testing.T) {
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:A0B4 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1
   2: 0A32A8C0:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
`
	got, err := parseSockets(strings.NewReader(tcp), stateListen)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:41140"), netip.MustParseAddrPort("192.168.50.10:80")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v", got, want)
	}
	const tcp6 = `  sl  local_address                         remote_address                        st
   0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 0A
   1: B80D0120000000000000000001000000:0050 00000000000000000000000000000000:0000 0A
`
	got, err = parseSockets(strings.NewReader(tcp6), stateListen)
	if err != nil || len(got) != 2 || got[0] != netip.MustParseAddrPort("[::1]:53") || got[1] != netip.MustParseAddrPort("[2001:db8::1]:80") {
		t.Errorf("IPv6: %v %v", got, err)
	}
	st := SocketTable{v1.ProtocolTCP: want}
	for _, tc := range []struct {
		addr string
		want bool
	}{{"10.96.0.10:41140", true}, {"192.168.50.10:80", true}, {"192.168.50.11:80", false}, {"[fd00::1]:41140", false}} {
		if got := st.Listening(v1.ProtocolTCP, netip.MustParseAddrPort(tc.addr)); got != tc.want {
			t.Errorf("Listening(%s) = %v", tc.addr, got)
		}
	}
	if st.Listening(v1.ProtocolUDP, want[0]) {
		t.Errorf("a TCP listener counts for UDP")
	}
}

// TestHTTPRelays: the table the daemon serves reads back; the metrics
// address's wildcard host is reached on loopback.
func TestHTTPRelays(t *testing.T) {
	for bind, want := range map[string]string{
		"0.0.0.0:10249":    "http://127.0.0.1:10249" + userspace.RelayTablePath,
		"[::]:10249":       "http://[::1]:10249" + userspace.RelayTablePath,
		":10249":           "http://127.0.0.1:10249" + userspace.RelayTablePath,
		"192.0.2.10:10249": "http://192.0.2.10:10249" + userspace.RelayTablePath,
	} {
		h, err := NewHTTPRelays(bind)
		if err != nil || h.URL != want {
			t.Errorf("%s: %v %v", bind, h, err)
		}
	}
	if _, err := NewHTTPRelays("10249"); err == nil {
		t.Errorf("a bind address without a port was taken")
	}
	table := userspace.RelayTable{Relays: []userspace.Relay{{Name: "web", Listen: netip.MustParseAddrPort("0.0.0.0:41000"),
		Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.244.1.1:8080")}}}}
	srv := httptest.NewServer(userspace.RelayTableHandler(func() userspace.RelayTable { return table }))
	defer srv.Close()
	h, _ := NewHTTPRelays("0.0.0.0:1")
	h.URL = srv.URL
	got, err := h.RelayTable(context.Background())
	if err != nil || len(got.Relays) != 1 || got.Relays[0].Endpoints[0] != table.Relays[0].Endpoints[0] {
		t.Errorf("%+v %v", got, err)
	}
	srv.Close()
	if _, err := h.RelayTable(context.Background()); err == nil || !strings.Contains(err.Error(), "relay table") {
		t.Errorf("closed server: %v", err)
	}
}
