package userspace

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
	"github.com/switchyard-proxy/switchyard/proxier"
)

var builtinChains = []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}

// wipe does to the fake what `iptables -t table -F` (and, with deleteChains,
// `-X`) does to the kernel.
func wipe(t *testing.T, fake *iptablestest.Fake, table string, deleteChains bool) {
	t.Helper()
	chains := fake.Chains(runner.IPv4, table)
	for _, c := range chains {
		if err := fake.FlushChain(runner.IPv4, table, c); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range chains {
		if deleteChains && !slices.Contains(builtinChains, c) {
			if err := fake.DeleteChain(runner.IPv4, table, c); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestVerifyRepairsDamage: a periodic sync finds what was flushed or
// deleted outside switchyard, restores exactly what was written before,
// counts the repair, and leaves an established proxied connection alone.
func TestVerifyRepairsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, f *iptablestest.Fake)
	}{
		{"iptables -t nat -F", func(t *testing.T, f *iptablestest.Fake) { wipe(t, f, "nat", false) }},
		{"iptables -F", func(t *testing.T, f *iptablestest.Fake) { wipe(t, f, "filter", false) }},
		{"nat, mangle and filter -F then -X", func(t *testing.T, f *iptablestest.Fake) {
			for _, table := range []string{"nat", "mangle", "filter"} {
				wipe(t, f, table, true)
			}
		}},
		{"one jump deleted", func(t *testing.T, f *iptablestest.Fake) {
			j := jumps()[1]
			if err := f.DeleteRule(runner.IPv4, j.table, j.chain, j.args...); err != nil {
				t.Fatal(err)
			}
		}},
		{"KUBE-PORTALS-CONTAINER flushed", func(t *testing.T, f *iptablestest.Fake) {
			if err := f.FlushChain(runner.IPv4, "nat", chainPortalsContainer); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			srv := startTCPServer(t, "web-1")
			st := newState()
			web := spName("web", v1.ProtocolTCP)
			addService(st, web, "10.96.0.10", 80, srv.addr())
			env.sync(t, st)
			before := env.fake.DumpAll(runner.IPv4)
			conn := dialProxy(t, env, web)
			tc.damage(t, env.fake)
			if env.fake.DumpAll(runner.IPv4) == before {
				t.Fatal("the damage changed nothing")
			}
			res, err := env.b.Sync(context.Background(), st, &proxier.Diff{Verify: true})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, env.fake.DumpAll(runner.IPv4)); diff != "" {
				t.Errorf("rules after the repair (-before +after):\n%s", diff)
			}
			if !res.Full {
				t.Errorf("a repair is a full rewrite of the family; the result says partial")
			}
			if v, _ := metricValue(t, env.reg, "switchyard_userspace_rules_repaired_total", "family", "ipv4"); v != 1 {
				t.Errorf("rules_repaired_total = %v, want 1", v)
			}
			if v, _ := metricValue(t, env.reg, "switchyard_rules_repaired_total", "mode", "userspace", "kind", "iptables", "ip_family", "IPv4"); v != 1 {
				t.Errorf("switchyard_rules_repaired_total{mode=userspace,kind=iptables,ip_family=IPv4} = %v, want 1", v)
			}
			if got := finish(t, conn, "late"); got != "web-1:late" {
				t.Errorf("established connection across the repair answered %q", got)
			}
		})
	}
}

// dialProxy opens a connection through a service port's proxy socket and
// waits until the endpoint is reached, so the connection is established
// end to end before the test damages the rules.
func dialProxy(t *testing.T, env *testEnv, name proxier.ServicePortName) *net.TCPConn {
	t.Helper()
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(env.proxyAddr(t, name, false)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	eventually(t, "the proxied connection to reach its endpoint", func() bool {
		v, _ := metricValue(t, env.reg, "switchyard_userspace_active_connections", "service_port", name.String())
		return v == 1
	})
	return c
}

// finish sends msg on c, half-closes and returns the answer.
func finish(t *testing.T, c *net.TCPConn, msg string) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write after the repair: %v", err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read after the repair: %v", err)
	}
	return string(out)
}

// TestVerifyIntactRestoresNothing: a periodic sync over intact rules
// lists chains and writes nothing.
func TestVerifyIntactRestoresNothing(t *testing.T) {
	env := newTestEnv(t)
	st := renderState()
	env.sync(t, st)
	n := len(env.fake.Restores())
	res, err := env.b.Sync(context.Background(), st, &proxier.Diff{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(env.fake.Restores()); got != n || res.Full {
		t.Errorf("periodic sync over intact rules: %d restores, full %v; want 0, false", got-n, res.Full)
	}
	if v, ok := metricValue(t, env.reg, "switchyard_userspace_rules_repaired_total", "family", "ipv4"); !ok || v != 0 {
		t.Errorf("rules_repaired_total = %v (exported %v), want 0", v, ok)
	}
}

// TestVerifyDuringChurn: syncs driven by changes do not check on every
// sync, but once the last check is older than VerifyInterval they do, so
// a flood of changes cannot postpone the repair.
func TestVerifyDuringChurn(t *testing.T) {
	env := newTestEnv(t)
	st := renderState()
	env.sync(t, st)
	before := env.fake.DumpAll(runner.IPv4)
	wipe(t, env.fake, "nat", true)
	partial := func() {
		t.Helper()
		if _, err := env.b.Sync(context.Background(), st, &proxier.Diff{}); err != nil {
			t.Fatal(err)
		}
	}
	partial()
	if env.fake.DumpAll(runner.IPv4) == before {
		t.Fatalf("a change-driven sync right after a full one checked the rules")
	}
	env.clock.Step(reconcile.DefaultVerifyInterval)
	partial()
	if diff := cmp.Diff(before, env.fake.DumpAll(runner.IPv4)); diff != "" {
		t.Errorf("rules after VerifyInterval (-before +after):\n%s", diff)
	}
}

// TestVerifyDisabled: a negative VerifyInterval turns the checks off.
func TestVerifyDisabled(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.VerifyInterval = -1 })
	st := renderState()
	env.sync(t, st)
	wipe(t, env.fake, "filter", false)
	wiped := env.fake.DumpAll(runner.IPv4)
	if _, err := env.b.Sync(context.Background(), st, &proxier.Diff{Verify: true}); err != nil {
		t.Fatal(err)
	}
	if got := env.fake.DumpAll(runner.IPv4); got != wiped {
		t.Errorf("rules rewritten with checks disabled:\n%s", got)
	}
}

// TestWrittenRules counts rules per table and chain; a declared chain
// without rules counts zero.
func TestWrittenRules(t *testing.T) {
	payload := []byte(`*nat
:KUBE-PORTALS-CONTAINER - [0:0]
:KUBE-PORTALS-HOST - [0:0]
-A KUBE-PORTALS-CONTAINER -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 40001
-A KUBE-PORTALS-CONTAINER -d 10.96.0.11/32 -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 40002
COMMIT
*filter
:KUBE-PORTALS-FILTER - [0:0]
-A KUBE-PORTALS-FILTER -d 10.96.0.12/32 -p tcp -m tcp --dport 80 -j REJECT
COMMIT
`)
	want := map[runner.TableChain]int{{Table: "nat", Chain: chainPortalsContainer}: 2, {Table: "filter", Chain: chainFilter}: 1}
	if diff := cmp.Diff(want, runner.PayloadRuleCounts(payload)); diff != "" {
		t.Errorf("PayloadRuleCounts (-want +got):\n%s", diff)
	}
}
