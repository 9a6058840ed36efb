package userspace

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestConntrackFlush: the UDP entries REDIRECTed to a proxy port are
// deleted when the port loses its last endpoint and when it closes; other
// entries stay, and a failed delete is retried by the next sync.
func TestConntrackFlush(t *testing.T) {
	table := conntracktest.NewTable()
	env := newTestEnv(t, func(c *Config) { c.Conntrack = table })
	s := startUDPServer(t, "a")
	st := newState()
	addService(st, udpName, "10.96.0.53", 53, s.addr())
	env.sync(t, st)
	port, _ := env.b.ProxyPort(udpName, v1.IPv4Protocol, false)
	proxy := netip.AddrPortFrom(netip.MustParseAddr("192.168.0.10"), port)
	ap := netip.MustParseAddrPort
	redirected := conntracktest.NATed(conntracktest.UDP, ap("10.244.1.5:40000"), ap("10.96.0.53:53"), proxy)
	keep := []conntracktest.Entry{
		conntracktest.Plain(conntracktest.UDP, ap("10.244.1.6:40001"), proxy), // sent to the proxy port itself
		conntracktest.NATed(conntracktest.UDP, ap("10.244.1.7:40002"), ap("10.96.0.54:53"), netip.AddrPortFrom(proxy.Addr(), port^1)),
		conntracktest.NATed(conntracktest.TCP, ap("10.244.1.5:40000"), ap("10.96.0.10:80"), proxy),
	}
	mustAdd := func(e ...conntracktest.Entry) {
		t.Helper()
		if err := table.Add(e...); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(what string, want ...conntracktest.Entry) {
		t.Helper()
		if got := table.Entries(v1.IPv4Protocol); !slices.Equal(got, want) {
			t.Errorf("%s: entries %v, want %v", what, got, want)
		}
	}
	mustAdd(append([]conntracktest.Entry{redirected}, keep...)...)

	env.sync(t, st)
	expect("unchanged endpoints", append([]conntracktest.Entry{redirected}, keep...)...)

	none := cloneState(st)
	setEndpoints(none, udpName)
	env.sync(t, none)
	expect("after the last endpoint went", keep...)

	mustAdd(redirected)
	env.sync(t, st)
	expect("endpoints back", append(slices.Clone(keep), redirected)...)

	table.FailNextDelete(errors.New("netlink busy"))
	if _, err := env.b.Sync(context.Background(), newState(), &proxier.Diff{}); err == nil {
		t.Fatalf("Sync hid the failed conntrack delete")
	}
	expect("after a failed delete", append(slices.Clone(keep), redirected)...)
	env.sync(t, newState())
	expect("retried after the service went", keep...)
}
