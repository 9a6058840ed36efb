package conntrack

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

var (
	webName = portName("web", "http", v1.ProtocolTCP)
	webA    = addrPort("10.244.1.10:8080")
	webB    = addrPort("10.244.2.10:8080")
	pod     = addrPort("10.244.3.9:8080") // a pod reached directly
)

func webService() *proxier.ServicePort {
	return &proxier.ServicePort{Name: webName, Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080,
		ClusterIPs: []netip.Addr{clusterIP}}
}

// vanishedEnv is a reaper over a fake table, on a fake clock.
type vanishedEnv struct {
	table  *conntracktest.Table
	clock  *clocktesting.FakeClock
	r      *VanishedReaper
	reaped chan struct{}
}

func newVanishedEnv(t *testing.T) *vanishedEnv {
	t.Helper()
	env := &vanishedEnv{table: conntracktest.NewTable(), clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0))}
	var err error
	env.r, err = NewVanishedReaper(env.table, VanishedConfig{Clock: env.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.r.Close)
	env.reaped = make(chan struct{}, 16)
	env.r.onReap = func() { env.reaped <- struct{}{} }
	// Flows to A and B through the cluster IP and the NodePort, one
	// straight to A's address, one to an unrelated pod.
	err = env.table.Add(
		conntracktest.NATed(conntracktest.TCP, c(1), netip.AddrPortFrom(clusterIP, 80), webA),
		conntracktest.NATed(conntracktest.TCP, c(2), netip.AddrPortFrom(nodeIP, 30080), webA),
		conntracktest.NATed(conntracktest.TCP, c(3), netip.AddrPortFrom(clusterIP, 80), webB),
		conntracktest.Plain(conntracktest.TCP, c(4), webA),
		conntracktest.Plain(conntracktest.TCP, c(5), pod),
	)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func (env *vanishedEnv) sync(st *proxier.State, diff *proxier.Diff) {
	env.r.PostSync(context.Background(), st, diff)
}

// advance steps the clock; with reap, it waits for the reap the step
// fires.
func (env *vanishedEnv) advance(t *testing.T, d time.Duration, reap bool) {
	t.Helper()
	env.clock.Step(d)
	if !reap {
		return
	}
	select {
	case <-env.reaped:
	case <-time.After(5 * time.Second):
		t.Fatal("no reap ran")
	}
}

func changed(name proxier.ServicePortName) *proxier.Diff {
	d := emptyDiff()
	d.Changed[name] = struct{}{}
	return d
}

func TestVanishedEndpointFlowsEndAfterGrace(t *testing.T) {
	env := newVanishedEnv(t)
	env.sync(state(webService(), eps(ready(webA), ready(webB))), fullDiff())
	env.sync(state(webService(), eps(ready(webB))), changed(webName))

	env.advance(t, DefaultVanishedGrace-time.Second, false)
	if n := len(env.table.Entries(v1.IPv4Protocol)); n != 5 {
		t.Fatalf("%d entries before the grace period ended, want all 5", n)
	}
	env.advance(t, time.Second, true)
	checkRemaining(t, env.table, []conntracktest.Entry{
		conntracktest.NATed(conntracktest.TCP, c(3), netip.AddrPortFrom(clusterIP, 80), webB),
		conntracktest.Plain(conntracktest.TCP, c(4), webA),
		conntracktest.Plain(conntracktest.TCP, c(5), pod),
	})
	if v := testutil.ToFloat64(env.r.deleted.WithLabelValues("IPv4")); v != 2 {
		t.Errorf("deleted counter %v, want 2", v)
	}
}

// TestVanishedEndpointReturns: an endpoint back within the grace period
// keeps its flows.
func TestVanishedEndpointReturns(t *testing.T) {
	env := newVanishedEnv(t)
	env.sync(state(webService(), eps(ready(webA), ready(webB))), fullDiff())
	env.sync(state(webService(), eps(ready(webB))), changed(webName))
	env.advance(t, 5*time.Second, false)
	env.sync(state(webService(), eps(ready(webA), ready(webB))), changed(webName))
	env.advance(t, time.Minute, true)
	if n := len(env.table.Entries(v1.IPv4Protocol)); n != 5 {
		t.Errorf("%d entries remain, want all 5: the endpoint came back", n)
	}
}

// TestPresentEndpointsKeepFlows: terminating and not-serving endpoints
// are still listed, and an address another service still lists is alive.
func TestPresentEndpointsKeepFlows(t *testing.T) {
	env := newVanishedEnv(t)
	other := &proxier.ServicePort{Name: portName("other", "http", v1.ProtocolTCP), Protocol: v1.ProtocolTCP, Port: 81,
		ClusterIPs: []netip.Addr{addr("10.96.0.11")}}
	env.sync(state(webService(), eps(ready(webA), ready(webB)), other, eps(ready(webA))), fullDiff())
	env.sync(state(webService(), eps(terminating(webA), ready(webB)), other, eps(ready(webA))), changed(webName))
	env.sync(state(webService(), eps(notServing(webA), ready(webB)), other, eps(ready(webA))), changed(webName))
	env.sync(state(webService(), eps(ready(webB)), other, eps(ready(webA))), changed(webName))
	env.advance(t, time.Minute, false)
	if env.r.timer != nil {
		t.Error("a reap is scheduled although nothing vanished")
	}
	if n := len(env.table.Entries(v1.IPv4Protocol)); n != 5 {
		t.Errorf("%d entries remain, want all 5: A is still listed somewhere", n)
	}
}

// TestDeletedServiceEndpointsVanish: a deleted service's endpoints vanish
// with it, and its (remembered) addresses identify their flows.
func TestDeletedServiceEndpointsVanish(t *testing.T) {
	env := newVanishedEnv(t)
	env.sync(state(webService(), eps(ready(webA), ready(webB))), fullDiff())
	d := changed(webName)
	d.Deleted[webName] = webService()
	env.sync(state(), d)
	env.advance(t, DefaultVanishedGrace, true)
	checkRemaining(t, env.table, []conntracktest.Entry{conntracktest.Plain(conntracktest.TCP, c(4), webA), conntracktest.Plain(conntracktest.TCP, c(5), pod)})
}

// TestVanishedEndpointIPv6: the same for an IPv6 endpoint, in the IPv6
// table.
func TestVanishedEndpointIPv6(t *testing.T) {
	table := conntracktest.NewTable()
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	r, err := NewVanishedReaper(table, VanishedConfig{Families: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reaped := make(chan struct{}, 4)
	r.onReap = func() { reaped <- struct{}{} }
	svc6, ep6a, ep6b := addr("fd00:96::10"), addrPort("[fd00:244::10]:8080"), addrPort("[fd00:244::11]:8080")
	client6 := addrPort("[fd00:244::99]:40000")
	sp := &proxier.ServicePort{Name: webName, Protocol: v1.ProtocolTCP, Port: 80, ClusterIPs: []netip.Addr{svc6}}
	if err := table.Add(conntracktest.NATed(conntracktest.TCP, client6, netip.AddrPortFrom(svc6, 80), ep6a)); err != nil {
		t.Fatal(err)
	}
	r.PostSync(context.Background(), state(sp, eps(ready(ep6a), ready(ep6b))), fullDiff())
	r.PostSync(context.Background(), state(sp, eps(ready(ep6b))), changed(webName))
	clk.Step(DefaultVanishedGrace)
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
		t.Fatal("no reap ran")
	}
	checkRemaining(t, table, nil)
	if v := testutil.ToFloat64(r.deleted.WithLabelValues("IPv6")); v != 1 {
		t.Errorf("IPv6 deleted counter %v, want 1", v)
	}
}

// relayRecorder is a ConnectionEnder that records what it was asked to
// end.
type relayRecorder struct{ asked []netip.Addr }

func (r *relayRecorder) EndConnectionsTo(addrs []netip.Addr) int {
	r.asked = append(r.asked, addrs...)
	return len(addrs)
}

// TestVanishedRelaysOnly: without a conntrack table (userspace mode) the
// relays are told, and the ended connections counted.
func TestVanishedRelaysOnly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	relay := &relayRecorder{}
	r, err := NewVanishedReaper(nil, VanishedConfig{Clock: clk, Relays: []ConnectionEnder{relay}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reaped := make(chan struct{}, 4)
	r.onReap = func() { reaped <- struct{}{} }
	r.PostSync(context.Background(), state(webService(), eps(ready(webA), ready(webB))), fullDiff())
	r.PostSync(context.Background(), state(webService(), eps(ready(webB))), changed(webName))
	clk.Step(DefaultVanishedGrace)
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
		t.Fatal("no reap ran")
	}
	if len(relay.asked) != 1 || relay.asked[0] != webA.Addr() {
		t.Errorf("relay asked to end %v, want [%s]", relay.asked, webA.Addr())
	}
	if v := testutil.ToFloat64(r.deleted.WithLabelValues("IPv4")); v != 1 {
		t.Errorf("ended counter %v, want 1", v)
	}
}
