package userspace

import (
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestRenderNodePortAddresses: with --nodeport-addresses every NodePort
// rule (nat redirects, filter refusals) is scoped to each prefix and no
// unscoped one is left; cluster-IP rules are unchanged.
func TestRenderNodePortAddresses(t *testing.T) {
	st := renderState()
	st.Services[spName("dns", v1.ProtocolUDP)].NodePort = 30053
	rc := renderConfig{family: v1.IPv4Protocol, listenIP: netip.IPv4Unspecified(),
		hostIP: netip.MustParseAddr("192.168.0.10"), local: proxier.LocalMatch{CIDR: netip.MustParsePrefix("10.244.0.0/16")},
		nodePortPrefixes: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24"), netip.MustParsePrefix("172.16.0.0/12")},
		mark:             0x1000, masqMark: 0x4000, fallback: true}
	got := string(render(rc, planFamily(st, v1.IPv4Protocol, false), renderPorts(v1.IPv4Protocol)))
	var nodePortLines []string
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, "nodePort") {
			nodePortLines = append(nodePortLines, l)
		}
	}
	// Each prefix gets the same rules (redirect of marked packets, kernel
	// fallback, node-originated DNAT, sentinel mark, refusal), and no
	// NodePort rule is left unscoped.
	perPrefix := map[string][]string{}
	for _, l := range nodePortLines {
		scoped := false
		for _, p := range []string{"192.168.0.0/24", "172.16.0.0/12"} {
			if strings.Contains(l, "-d "+p+" ") {
				perPrefix[p] = append(perPrefix[p], strings.Replace(l, p, "PREFIX", 1))
				scoped = true
			}
		}
		if !scoped {
			t.Errorf("NodePort rule not scoped to a prefix: %s", l)
		}
	}
	if d := cmp.Diff(perPrefix["192.168.0.0/24"], perPrefix["172.16.0.0/12"]); d != "" {
		t.Errorf("prefixes got different NodePort rules (-first +second):\n%s", d)
	}
	for _, want := range []string{"-j REDIRECT --to-ports", "fallback", "-j DNAT --to-destination 192.168.0.10:", "--set-xmark", "-j REJECT"} {
		if !slices.ContainsFunc(perPrefix["172.16.0.0/12"], func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("no NodePort rule with %q per prefix:\n%s", want, strings.Join(perPrefix["172.16.0.0/12"], "\n"))
		}
	}
	if !strings.Contains(got, `-A KUBE-PORTALS-CONTAINER -d 10.96.0.10/32 -p tcp -m comment --comment "ns/web:p cluster IP" -m tcp --dport 80 -m mark --mark 0x1000/0x1000 -j REDIRECT --to-ports 40001`) {
		t.Errorf("cluster-IP rule changed:\n%s", got)
	}
}

// TestNodePortAddressesPerFamily: the backend scopes each family's
// NodePorts by that family's prefixes only; a family without prefixes
// (or with a /0) serves NodePorts on every local address, as iptables
// mode does.
func TestNodePortAddressesPerFamily(t *testing.T) {
	for _, tc := range []struct {
		name     string
		prefixes []string
		wantD    []string // -d of the NodePort rules; "" for unscoped
	}{
		{"none", nil, []string{""}},
		{"v4 prefix", []string{"192.168.0.10/32"}, []string{"192.168.0.10/32"}},
		{"v6 prefix only: v4 unrestricted", []string{"fd00::/64"}, []string{""}},
		{"zero prefix: unrestricted", []string{"192.168.0.0/24", "0.0.0.0/0"}, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ps []netip.Prefix
			for _, p := range tc.prefixes {
				ps = append(ps, netip.MustParsePrefix(p))
			}
			env := newTestEnv(t, func(c *Config) { c.NodePortAddresses = ps })
			st := newState()
			addService(st, spName("np", v1.ProtocolTCP), "10.96.0.7", 80, netip.MustParseAddrPort("10.244.1.2:8080")).NodePort = 30007
			env.sync(t, st)
			var got []string
			for _, l := range strings.Split(string(env.b.applied["ipv4"]), "\n") {
				if strings.HasPrefix(l, "-A KUBE-NODEPORT-HOST") {
					d := ""
					if _, after, ok := strings.Cut(l, " -d "); ok {
						d, _, _ = strings.Cut(after, " ")
					}
					got = append(got, d)
				}
			}
			if !slices.Equal(got, tc.wantD) {
				t.Errorf("NodePort host rules scoped to %q, want %q", got, tc.wantD)
			}
		})
	}
}

// fakeReserver models the kernel's bind table: a second holder of one
// protocol, address and port fails with EADDRINUSE, and so does a
// wildcard holder when a specific address of the port is bound (or the
// other way round). taken are ports "another process" holds.
type fakeReserver struct {
	local []netip.Addr
	held  map[holdKey]bool
	taken map[holdKey]bool
}

func newFakeReserver(local ...string) *fakeReserver {
	f := &fakeReserver{held: map[holdKey]bool{}, taken: map[holdKey]bool{}}
	for _, a := range local {
		f.local = append(f.local, netip.MustParseAddr(a))
	}
	return f
}

func (f *fakeReserver) conflicts(k holdKey) bool {
	for o := range maps.Keys(f.held) {
		if o.proto == k.proto && o.addr.Port() == k.addr.Port() && familyOf(o.addr.Addr()) == familyOf(k.addr.Addr()) &&
			(o.addr.Addr() == k.addr.Addr() || o.addr.Addr().IsUnspecified() || k.addr.Addr().IsUnspecified()) {
			return true
		}
	}
	return false
}

func (f *fakeReserver) Reserve(proto v1.Protocol, addr netip.AddrPort) (io.Closer, error) {
	k := holdKey{proto: proto, addr: addr}
	if f.taken[k] || f.conflicts(k) {
		return nil, fmt.Errorf("bind %s %s: %w", proto, addr, syscall.EADDRINUSE)
	}
	f.held[k] = true
	return closerFunc(func() error {
		if !f.held[k] {
			panic("holder closed twice: " + addr.String())
		}
		delete(f.held, k)
		return nil
	}), nil
}

func (f *fakeReserver) LocalAddrs() ([]netip.Addr, error) { return f.local, nil }

func (f *fakeReserver) dump() []string {
	var out []string
	for k := range f.held {
		out = append(out, string(k.proto)+" "+k.addr.String())
	}
	slices.Sort(out)
	return out
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }

// nodePortState has NodePorts of every protocol, without endpoints unless
// eps are given: a NodePort with a usable endpoint has a sentinel, which
// holds the port itself (TestNodePortSentinelHolds).
func nodePortState(eps ...netip.AddrPort) *proxier.State {
	st := newState()
	addService(st, spName("web", v1.ProtocolTCP), "10.96.0.10", 80, eps...).NodePort = 30080
	addService(st, spName("dns", v1.ProtocolUDP), "10.96.0.53", 53, eps...).NodePort = 30053
	addService(st, spName("sig", v1.ProtocolSCTP), "10.96.0.20", 9999, eps...).NodePort = 30099
	addService(st, spName("plain", v1.ProtocolTCP), "10.96.0.11", 80, eps...)
	return st
}

// TestNodePortSentinelHolds: a NodePort with a usable endpoint is held by
// its sentinel (bound to the wildcard address, which no holder could
// share), so no holder is opened for it; when it loses its endpoints the
// sentinel closes and a holder takes the port; when they come back the
// holder gives way to the sentinel again.
func TestNodePortSentinelHolds(t *testing.T) {
	fr := newFakeReserver()
	env := newTestEnv(t, func(c *Config) { c.PortReserver = fr })
	ep := netip.MustParseAddrPort("10.244.1.2:8080")
	sentinelPorts := func() []string {
		env.b.mu.Lock()
		defer env.b.mu.Unlock()
		var out []string
		for k := range env.b.sentinels.open {
			if k.addr.Addr().IsUnspecified() {
				out = append(out, fmt.Sprintf("%s %s", k.proto, k.addr))
			}
		}
		slices.Sort(out)
		return out
	}
	both := []string{"TCP 0.0.0.0:30080", "UDP 0.0.0.0:30053"}
	for i, step := range []struct {
		eps                []netip.AddrPort
		holders, sentinels []string
	}{
		{[]netip.AddrPort{ep}, nil, both},
		{nil, both, nil},
		{[]netip.AddrPort{ep}, nil, both},
	} {
		env.sync(t, nodePortState(step.eps...))
		if d := cmp.Diff(step.holders, fr.dump(), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("step %d: holders (-want +got):\n%s", i, d)
		}
		if d := cmp.Diff(step.sentinels, sentinelPorts(), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("step %d: NodePort sentinels (-want +got):\n%s", i, d)
		}
	}
}

// TestNodePortReservation: every TCP and UDP NodePort is held on each
// address NodePorts serve (wildcards without --nodeport-addresses, the
// local addresses inside the prefixes with them, per family); SCTP and
// ports without NodePort are not; holders of a removed NodePort close;
// Close releases all.
func TestNodePortReservation(t *testing.T) {
	tests := []struct {
		name     string
		families []v1.IPFamily
		prefixes []string
		want     []string
	}{
		{"all addresses", nil, nil, []string{"TCP 0.0.0.0:30080", "UDP 0.0.0.0:30053"}},
		{"nodeport-addresses", nil, []string{"192.168.0.0/24", "10.1.0.0/16"},
			[]string{"TCP 10.1.2.3:30080", "TCP 192.168.0.10:30080", "TCP 192.168.0.11:30080",
				"UDP 10.1.2.3:30053", "UDP 192.168.0.10:30053", "UDP 192.168.0.11:30053"}},
		{"primary (resolved to /32)", nil, []string{"192.168.0.10/32"}, []string{"TCP 192.168.0.10:30080", "UDP 192.168.0.10:30053"}},
		{"dual-stack, v4 restricted only", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, []string{"10.1.0.0/16"},
			[]string{"TCP 10.1.2.3:30080", "TCP [::]:30080", "UDP 10.1.2.3:30053", "UDP [::]:30053"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fr := newFakeReserver("127.0.0.1", "192.168.0.10", "192.168.0.11", "10.1.2.3", "172.16.0.1", "::1", "fd00::10")
			var ps []netip.Prefix
			for _, p := range tc.prefixes {
				ps = append(ps, netip.MustParsePrefix(p))
			}
			env := newTestEnv(t, func(c *Config) { c.PortReserver, c.NodePortAddresses, c.Families = fr, ps, tc.families })
			st := nodePortState()
			if len(tc.families) == 2 {
				for _, sp := range st.Services {
					sp.ClusterIPs = append(sp.ClusterIPs, netip.MustParseAddr("fd00::"+sp.ClusterIPs[0].String()[len("10.96.0."):]))
				}
			}
			env.sync(t, st)
			if d := cmp.Diff(tc.want, fr.dump()); d != "" {
				t.Errorf("held (-want +got):\n%s", d)
			}
			env.sync(t, st) // idempotent: no double bind (the fake would refuse it)
			if d := cmp.Diff(tc.want, fr.dump()); d != "" {
				t.Errorf("after a second sync (-want +got):\n%s", d)
			}
			delete(st.Services, spName("dns", v1.ProtocolUDP))
			env.sync(t, st)
			for _, h := range fr.dump() {
				if strings.HasPrefix(h, "UDP") {
					t.Errorf("holder of a removed NodePort still open: %s", h)
				}
			}
			env.b.Close()
			if h := fr.dump(); len(h) != 0 {
				t.Errorf("Close left holders open: %v", h)
			}
		})
	}
}

// TestNodePortTaken: a NodePort another socket holds is skipped (the
// sync succeeds and the rules still redirect it), counted while taken,
// and reserved by the first sync after it is free.
func TestNodePortTaken(t *testing.T) {
	fr := newFakeReserver()
	taken := holdKey{proto: v1.ProtocolTCP, addr: netip.MustParseAddrPort("0.0.0.0:30080")}
	fr.taken[taken] = true
	env := newTestEnv(t, func(c *Config) { c.PortReserver = fr })
	st := nodePortState()
	env.sync(t, st)
	if d := cmp.Diff([]string{"UDP 0.0.0.0:30053"}, fr.dump()); d != "" {
		t.Errorf("held (-want +got):\n%s", d)
	}
	unreserved := func(proto string) float64 {
		v, _ := metricValue(t, env.reg, "switchyard_userspace_nodeports_unreserved", "protocol", proto)
		return v
	}
	if got := unreserved("TCP"); got != 1 {
		t.Errorf("nodeports_unreserved{TCP} = %v, want 1", got)
	}
	if got := unreserved("UDP"); got != 0 {
		t.Errorf("nodeports_unreserved{UDP} = %v, want 0", got)
	}
	if !strings.Contains(string(env.b.applied["ipv4"]), "--dport 30080 -j REJECT") {
		t.Errorf("the taken NodePort lost its rules")
	}
	env.b.mu.Lock()
	_, logged := env.b.holds.failing[taken]
	env.b.mu.Unlock()
	if !logged {
		t.Errorf("the taken port is not tracked as failing (it would be logged at every sync)")
	}
	delete(fr.taken, taken)
	env.sync(t, st)
	if d := cmp.Diff([]string{"TCP 0.0.0.0:30080", "UDP 0.0.0.0:30053"}, fr.dump()); d != "" {
		t.Errorf("after the port was freed (-want +got):\n%s", d)
	}
	if got := unreserved("TCP"); got != 0 {
		t.Errorf("nodeports_unreserved{TCP} = %v after the port was freed, want 0", got)
	}
}
