package userspace

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestNewValidates(t *testing.T) {
	fake := iptablestest.NewFake()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no runner", Config{}},
		{"bad family", Config{Runner: fake, Families: []v1.IPFamily{"IPv5"}}},
		{"negative timeout", Config{Runner: fake, UDPIdleTimeout: -time.Second}},
	}
	for _, tc := range tests {
		if _, err := New(tc.cfg); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
	b, err := New(Config{Runner: fake})
	if err != nil {
		t.Fatal(err)
	}
	if b.cfg.UDPIdleTimeout != 250*time.Millisecond || len(b.cfg.Families) != 1 || b.Name() != "userspace" {
		t.Errorf("defaults: %+v, name %q", b.cfg, b.Name())
	}
}

// TestSyncInstallsValidRules: the strict fake accepts the payload and the
// jumps, every jump target exists, and repeated full syncs do not
// duplicate the jumps.
func TestSyncInstallsValidRules(t *testing.T) {
	env := newTestEnv(t)
	st := renderState()
	for range 2 {
		env.sync(t, st)
	}
	for _, j := range jumps() {
		n := 0
		for _, r := range env.fake.Rules(runner.IPv4, j.table, j.chain) {
			if r.Jump == j.args[len(j.args)-1] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d jumps from %s/%s to %s, want 1", n, j.table, j.chain, j.args[len(j.args)-1])
		}
	}
	for _, tc := range ownedTables() {
		for _, c := range tc.chains {
			if ok, _ := env.fake.ChainExists(runner.IPv4, tc.table, c); !ok {
				t.Errorf("chain %s/%s missing", tc.table, c)
			}
		}
	}
	port, _ := env.b.ProxyPort(spName("web", v1.ProtocolTCP), v1.IPv4Protocol, false)
	want := "-j DNAT --to-destination 192.168.0.10:" + strconv.Itoa(int(port))
	if nat := env.fake.Dump(runner.IPv4, "nat"); !strings.Contains(nat, want) {
		t.Errorf("nat table lacks %q:\n%s", want, nat)
	}
}

// TestSyncRestoresOnlyChanges: a partial sync with unchanged rules
// restores nothing; an endpoint change that changes no rule neither; a
// full sync always restores.
func TestSyncRestoresOnlyChanges(t *testing.T) {
	env := newTestEnv(t)
	st := renderState()
	env.sync(t, st)
	partial := func(st *proxier.State) {
		t.Helper()
		if _, err := env.b.Sync(context.Background(), st, &proxier.Diff{}); err != nil {
			t.Fatal(err)
		}
	}
	n := len(env.fake.Restores())
	partial(st)
	if got := len(env.fake.Restores()); got != n {
		t.Errorf("%d restores for a sync that changes no rule", got-n)
	}
	// The kernel fallback DNATs to the endpoints, so moving one rewrites
	// the rules (once).
	moved := cloneState(st)
	setEndpoints(moved, spName("web", v1.ProtocolTCP), netip.MustParseAddrPort("10.244.1.9:8080"))
	partial(moved)
	partial(moved)
	if got := len(env.fake.Restores()); got != n+1 {
		t.Errorf("moving an endpoint: %d restores, want 1", got-n)
	}
	empty := cloneState(moved)
	setEndpoints(empty, spName("web", v1.ProtocolTCP))
	partial(empty)
	if got := len(env.fake.Restores()); got != n+2 {
		t.Errorf("losing every endpoint: %d restores, want 1", got-n-1)
	}
	env.sync(t, empty)
	if got := len(env.fake.Restores()); got != n+3 {
		t.Errorf("full sync: %d restores, want 1", got-n-2)
	}
}

// TestSyncFailureKeepsSockets: when the restore fails, the previous rules
// stay and so do the sockets they point at; the next sync retires them.
func TestSyncFailureKeepsSockets(t *testing.T) {
	env := newTestEnv(t)
	st := renderState()
	env.sync(t, st)
	before := env.fake.DumpAll(runner.IPv4)
	web := spName("web", v1.ProtocolTCP)
	gone := cloneState(st)
	delete(gone.Services, web)
	env.fake.FailNextRestores(1)
	if _, err := env.b.Sync(context.Background(), gone, &proxier.Diff{}); !errors.Is(err, iptablestest.ErrInjected) {
		t.Fatalf("Sync = %v, want the injected error", err)
	}
	if after := env.fake.DumpAll(runner.IPv4); after != before {
		t.Errorf("a failed sync changed the rules")
	}
	if _, ok := env.b.ProxyPort(web, v1.IPv4Protocol, false); !ok {
		t.Errorf("a failed sync closed a socket the rules in force use")
	}
	if _, err := env.b.Sync(context.Background(), gone, &proxier.Diff{Full: true}); err != nil {
		t.Fatal(err)
	}
	if _, ok := env.b.ProxyPort(web, v1.IPv4Protocol, false); ok {
		t.Errorf("socket of a removed service still open")
	}
}

func TestCleanupRemovesEverything(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} })
	pristine := iptablestest.NewFake()
	env.sync(t, renderState())
	if err := env.b.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []runner.Family{runner.IPv4, runner.IPv6} {
		if got, want := env.fake.DumpAll(fam), pristine.DumpAll(fam); got != want {
			t.Errorf("%s after Cleanup:\n%s", fam, got)
		}
	}
	// Cleanup of nothing is no error, and a later sync reinstalls.
	if err := env.b.Cleanup(context.Background()); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
	if _, err := env.b.Sync(context.Background(), renderState(), &proxier.Diff{}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := env.fake.ChainExists(runner.IPv4, "nat", chainPortalsContainer); !ok {
		t.Errorf("sync after Cleanup did not reinstall the chains")
	}
}

// TestEndpointChangeKeepsListener: an endpoint change swaps the balancer
// of the same socket; a connection open before the change drains to its
// old endpoint while new ones go to the new endpoint.
func TestEndpointChangeKeepsListener(t *testing.T) {
	env := newTestEnv(t)
	s1, s2 := startTCPServer(t, "s1"), startTCPServer(t, "s2")
	st := newState()
	name := spName("web", v1.ProtocolTCP)
	addService(st, name, "10.96.0.10", 80, s1.addr())
	env.sync(t, st)
	addr := env.proxyAddr(t, name, false)
	sock := env.b.relays.sockets[socketKey{name: name, family: v1.IPv4Protocol}]

	old, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.Write([]byte("early"))
	// s1 must have accepted it: the proxy counts a connection as active
	// when it accepts it, before it picks (and dials) the endpoint.
	eventually(t, "the early connection to reach s1", func() bool { return sock.active() == 1 && s1.accepted() == 1 })

	st2 := cloneState(st)
	setEndpoints(st2, name, s2.addr())
	env.sync(t, st2)
	if got := env.proxyAddr(t, name, false); got != addr || env.b.relays.sockets[socketKey{name: name, family: v1.IPv4Protocol}] != sock {
		t.Fatalf("endpoint change replaced the socket (%s -> %s)", addr, got)
	}
	if got, err := request(t, addr, "new"); err != nil || got != "s2:new" {
		t.Errorf("new connection: %q, %v; want s2:new", got, err)
	}
	old.CloseWrite()
	old.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 64)
	n, _ := old.Read(buf)
	if got := string(buf[:n]); got != "s1:early" {
		t.Errorf("connection from before the change: %q, want s1:early", got)
	}
}

// TestSocketLifecycle: sockets come and go with service ports (and the
// external socket with the traffic policy), and Close closes them all.
func TestSocketLifecycle(t *testing.T) {
	env := newTestEnv(t)
	s1 := startTCPServer(t, "s1")
	name := spName("web", v1.ProtocolTCP)
	st := newState()
	sp := addService(st, name, "10.96.0.10", 80, s1.addr())
	env.sync(t, st)
	addr := env.proxyAddr(t, name, false)
	if ext := env.proxyAddr(t, name, true); ext != addr {
		t.Errorf("cluster policies: external socket %s, want the internal %s", ext, addr)
	}

	local := *sp
	local.NodePort, local.ExternalPolicyLocal = 30080, true
	st2 := cloneState(st)
	st2.Services[name] = &local
	env.sync(t, st2)
	if ext := env.proxyAddr(t, name, true); ext == addr || env.proxyAddr(t, name, false) != addr {
		t.Errorf("eTP=Local: external %s, internal %s; want a second socket next to %s", ext, env.proxyAddr(t, name, false), addr)
	}
	env.sync(t, st)
	if _, ok := env.b.relays.sockets[socketKey{name: name, family: v1.IPv4Protocol, kind: externalTraffic}]; ok {
		t.Errorf("external socket kept after the policy went back to Cluster")
	}

	env.sync(t, newState())
	if _, ok := env.b.ProxyPort(name, v1.IPv4Protocol, false); ok {
		t.Fatalf("socket kept after the service went away")
	}
	if _, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(addr)); err == nil {
		t.Errorf("the removed service's socket still accepts")
	}

	env.sync(t, st)
	again := env.proxyAddr(t, name, false)
	env.b.Close()
	if _, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(again)); err == nil {
		t.Errorf("socket accepts after Close")
	}
	if _, err := env.b.Sync(context.Background(), st, &proxier.Diff{Full: true}); err == nil {
		t.Errorf("Sync after Close succeeded")
	}
}

// TestSCTPIsNotProxied: SCTP ports get neither sockets nor rules.
func TestSCTPIsNotProxied(t *testing.T) {
	env := newTestEnv(t)
	st := newState()
	name := spName("sctp", v1.ProtocolSCTP)
	addService(st, name, "10.96.0.30", 9, netip.MustParseAddrPort("10.244.1.2:9"))
	env.sync(t, st)
	if _, ok := env.b.ProxyPort(name, v1.IPv4Protocol, false); ok {
		t.Errorf("SCTP service port got a socket")
	}
	if strings.Contains(env.fake.DumpAll(runner.IPv4), "10.96.0.30") {
		t.Errorf("SCTP service port got rules")
	}
}
