package conntrack

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/switchyard-proxy/switchyard/proxier"
)

var (
	ntpName = portName("ntp", "ntp", v1.ProtocolUDP)
	ntpIP   = addr("10.96.0.11")
	epC     = addrPort("10.244.4.10:123")
	epX     = addrPort("10.244.9.10:123")
)

func ntpService() *proxier.ServicePort {
	return &proxier.ServicePort{Name: ntpName, Protocol: v1.ProtocolUDP, Port: 123, ClusterIPs: []netip.Addr{ntpIP}}
}

func scopeStrings(fs []ctnetlink.Filter) []string {
	out := []string{}
	for _, f := range fs {
		dst := ""
		if f.OrigDst.IsValid() {
			dst = f.OrigDst.String()
		}
		out = append(out, fmt.Sprintf("%d %s", f.Proto, dst))
	}
	slices.Sort(out)
	return out
}

func reconcile(t *testing.T, r *Reconciler, st *proxier.State, d *proxier.Diff) int {
	t.Helper()
	n, err := r.Reconcile(context.Background(), st, d)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPassScope: a full sync's pass asks the kernel for every UDP entry;
// an endpoint's removal asks only for the entries of its service's four
// addresses (one kernel filter each; the table is too small for its UDP
// share to be learnt, and four is what a pass dares blind), so a stale
// entry of another service waits for the next wide pass.
func TestPassScope(t *testing.T) {
	tb := conntracktest.NewTable()
	tcp := func(n int) conntracktest.Entry {
		return conntracktest.NATed(conntracktest.TCP, c(n), netip.AddrPortFrom(clusterIP, 80), addrPort("10.244.1.10:8080"))
	}
	err := tb.Add(udpVia(c(1), clusterIP, 53, epA), udpVia(c(2), clusterIP, 53, epB), udpVia(c(3), ntpIP, 123, epC), tcp(4), tcp(5))
	if err != nil {
		t.Fatal(err)
	}
	r := New(tb, Config{}, nil)
	if n := reconcile(t, r, state(dnsService(), eps(ready(epA), ready(epB)), ntpService(), eps(ready(epC))), fullDiff()); n != 0 {
		t.Errorf("the full sync's pass deleted %d", n)
	}
	if got := scopeStrings(tb.LastScope(v1.IPv4Protocol)); !slices.Equal(got, []string{"17 "}) {
		t.Errorf("full sync's scope %v, want every UDP entry", got)
	}

	if err := tb.Add(udpVia(c(6), ntpIP, 123, epX)); err != nil { // stale, but no Diff names it
		t.Fatal(err)
	}
	st := state(dnsService(), eps(ready(epB)), ntpService(), eps(ready(epC)))
	if n := reconcile(t, r, st, staleDiff(dnsName, epA)); n != 1 {
		t.Errorf("the endpoint's removal deleted %d entries, want 1", n)
	}
	want := []string{"17 10.96.0.10:53", "17 192.168.1.5:30053", "17 198.51.100.9:53", "17 203.0.113.7:53"}
	if got := scopeStrings(tb.LastScope(v1.IPv4Protocol)); !slices.Equal(got, want) {
		t.Errorf("targeted scope %v, want %v", got, want)
	}
	checkRemaining(t, tb, []conntracktest.Entry{udpVia(c(2), clusterIP, 53, epB), udpVia(c(3), ntpIP, 123, epC),
		udpVia(c(6), ntpIP, 123, epX), tcp(4), tcp(5)})

	if n := reconcile(t, r, st, fullDiff()); n != 1 {
		t.Errorf("the next full sync deleted %d entries, want the one left", n)
	}
}

// TestPassScopeFewUDP: when the last wide pass was sent a small share of
// the table, walking it once per address costs more than sending every
// UDP entry: a change naming four addresses makes a wide pass, one
// naming a single address a targeted one.
func TestPassScopeFewUDP(t *testing.T) {
	tb := conntracktest.NewTable()
	var entries []conntracktest.Entry
	for i := range learnMin {
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}), 40000)
		entries = append(entries, conntracktest.Plain(conntracktest.TCP, client, addrPort("198.18.0.1:443")))
	}
	entries = append(entries, udpVia(c(1), clusterIP, 53, epA), udpVia(c(2), ntpIP, 123, epC))
	if err := tb.Add(entries...); err != nil {
		t.Fatal(err)
	}
	r := New(tb, Config{}, nil)
	reconcile(t, r, state(dnsService(), eps(ready(epA)), ntpService(), eps(ready(epC))), fullDiff())

	reconcile(t, r, state(dnsService(), eps(ready(epB)), ntpService(), eps(ready(epC))), staleDiff(dnsName, epA))
	if got := scopeStrings(tb.LastScope(v1.IPv4Protocol)); !slices.Equal(got, []string{"17 "}) {
		t.Errorf("four addresses in a table of few UDP entries: scope %v, want a wide pass", got)
	}
	reconcile(t, r, state(dnsService(), eps(ready(epB)), ntpService(), eps()), staleDiff(ntpName, epC))
	if got := scopeStrings(tb.LastScope(v1.IPv4Protocol)); !slices.Equal(got, []string{"17 10.96.0.11:123"}) {
		t.Errorf("one address: scope %v, want it alone", got)
	}
}

func TestTargetedPays(t *testing.T) {
	cases := []struct {
		share float64
		n     int
		want  bool
	}{
		{-1, 1, true}, {-1, blindTargeted, true}, {-1, blindTargeted + 1, false}, // unknown share
		{0.05, 2, false}, {0.5, 7, true}, {0.5, 8, false}, {1, maxTargeted + 1, false},
	}
	for _, tc := range cases {
		r := &Reconciler{sentShare: tc.share}
		if got := r.targetedPays(tc.n); got != tc.want {
			t.Errorf("share %v, %d addresses: %v, want %v", tc.share, tc.n, got, tc.want)
		}
	}
}

// TestIPv6ScopeByPort: an IPv6 pass asks the kernel for each protocol and
// port once (its dump filter cannot compare IPv6 addresses: see
// ctnetlink.Filter); an IPv4 pass for the same targets names each address.
func TestIPv6ScopeByPort(t *testing.T) {
	v4 := addr("10.96.0.11")
	v6, v6b := addr("fd00:10:96::b"), addr("fd00:10:96::c")
	targets := keySet{
		{proto: protoUDP, addr: v4, port: 123}:  {},
		{proto: protoUDP, addr: v6, port: 123}:  {},
		{proto: protoUDP, addr: v6b, port: 123}: {},
		{proto: protoUDP, addr: v6b, port: 53}:  {},
	}
	got := scopeStrings(scopeOf(serviceIndex{}, targets, v1.IPv6Protocol))
	if len(got) != 2 || !strings.HasSuffix(got[0], "]:123") || !strings.HasSuffix(got[1], "]:53") {
		t.Errorf("IPv6 scope %q, want one filter for UDP 123 and one for UDP 53", got)
	}
	if got, want := scopeStrings(scopeOf(serviceIndex{}, targets, v1.IPv4Protocol)), []string{"17 10.96.0.11:123"}; !slices.Equal(got, want) {
		t.Errorf("IPv4 scope %q, want %q", got, want)
	}
}

// TestWalksOfCountsIPv6ByPort: the cost a targeted pass is judged by is
// its kernel dumps, and IPv6 targets on one protocol and port share one.
func TestWalksOfCountsIPv6ByPort(t *testing.T) {
	keys := keySet{
		{proto: protoUDP, addr: addr("10.96.0.10"), port: 53}:    {},
		{proto: protoUDP, addr: addr("10.96.0.11"), port: 53}:    {},
		{proto: protoUDP, addr: addr("fd00:10:96::a"), port: 53}: {},
		{proto: protoUDP, addr: addr("fd00:10:96::b"), port: 53}: {},
		{proto: protoUDP, addr: addr("fd00:10:96::c"), port: 54}: {},
	}
	if got := walksOf(keys); got != 4 {
		t.Errorf("walksOf = %d, want 4 (two IPv4 addresses, two IPv6 ports)", got)
	}
}
