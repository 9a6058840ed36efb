package ipvs_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestGracefulTermination(t *testing.T) {
	const vs = "TCP/10.96.0.10:80"
	type step struct {
		do   func(e *env, web proxier.ServicePortName)
		want []string // real servers after a partial sync of web
	}
	setConns := func(rs string, active, inactive int) func(*env, proxier.ServicePortName) {
		return func(e *env, _ proxier.ServicePortName) {
			if err := e.k.IPVS.SetConnections(vs, rs, active, inactive); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	removeB := func(e *env, web proxier.ServicePortName) { e.eps(web, "10.244.1.2:8080") }
	cases := []struct {
		name  string
		steps []step
	}{
		{"no connections: deleted at once", []step{
			{removeB, []string{"10.244.1.2:8080/1"}},
		}},
		{"active connection: weight 0 until it ends", []step{
			{setConns("10.244.1.3:8080", 1, 0), []string{"10.244.1.2:8080/1", "10.244.1.3:8080/1"}},
			{removeB, []string{"10.244.1.2:8080/1", "10.244.1.3:8080/0"}},
			{func(*env, proxier.ServicePortName) {}, []string{"10.244.1.2:8080/1", "10.244.1.3:8080/0"}},
			{setConns("10.244.1.3:8080", 0, 1), []string{"10.244.1.2:8080/1", "10.244.1.3:8080/0"}},
			{setConns("10.244.1.3:8080", 0, 0), []string{"10.244.1.2:8080/1"}},
		}},
		{"connection never ends: deleted after the timeout", []step{
			{setConns("10.244.1.3:8080", 3, 2), []string{"10.244.1.2:8080/1", "10.244.1.3:8080/1"}},
			{removeB, []string{"10.244.1.2:8080/1", "10.244.1.3:8080/0"}},
			{func(e *env, _ proxier.ServicePortName) { e.clock.Step(59 * time.Second) }, []string{"10.244.1.2:8080/1", "10.244.1.3:8080/0"}},
			{func(e *env, _ proxier.ServicePortName) { e.clock.Step(time.Second) }, []string{"10.244.1.2:8080/1"}},
		}},
		{"endpoint comes back while draining", []step{
			{setConns("10.244.1.3:8080", 1, 0), []string{"10.244.1.2:8080/1", "10.244.1.3:8080/1"}},
			{removeB, []string{"10.244.1.2:8080/1", "10.244.1.3:8080/0"}},
			{func(e *env, web proxier.ServicePortName) { e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080") },
				[]string{"10.244.1.2:8080/1", "10.244.1.3:8080/1"}},
			{func(e *env, _ proxier.ServicePortName) { e.clock.Step(time.Hour) }, []string{"10.244.1.2:8080/1", "10.244.1.3:8080/1"}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(c *sy.Config) { c.GracefulTerminationTimeout = time.Minute })
			web := e.svc("web", "10.96.0.10", 80)
			e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080")
			e.sync(nil)
			for i, s := range c.steps {
				s.do(e, web)
				e.sync(changed(web))
				if got := e.reals(vs); !slices.Equal(got, s.want) {
					t.Fatalf("step %d: real servers %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

func TestUDPRealServersAreDeletedAtOnce(t *testing.T) {
	e := newEnv(t)
	dns := spn("dns", v1.ProtocolUDP)
	e.svc("dns", "10.96.0.53", 53, func(sp *proxier.ServicePort) { sp.Name, sp.Protocol = dns, v1.ProtocolUDP })
	e.eps(dns, "10.244.1.7:53", "10.244.1.8:53")
	e.sync(nil)
	if err := e.k.IPVS.SetConnections("UDP/10.96.0.53:53", "10.244.1.8:53", 0, 5); err != nil {
		t.Fatal(err)
	}
	e.eps(dns, "10.244.1.7:53")
	e.sync(changed(dns))
	if got := e.reals("UDP/10.96.0.53:53"); !slices.Equal(got, []string{"10.244.1.7:53/1"}) {
		t.Errorf("UDP real servers = %v: no graceful termination for UDP (expire_nodest_conn moves flows)", got)
	}
}

func TestDrainingSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080")
	e.sync(nil)
	if err := e.k.IPVS.SetConnections("TCP/10.96.0.10:80", "10.244.1.3:8080", 1, 0); err != nil {
		t.Fatal(err)
	}
	e.eps(web, "10.244.1.2:8080")
	e.sync(changed(web))
	// A new backend on the same kernel finds the weight-0 server on its
	// first (full) sync and keeps draining it.
	b2, err := sy.New(sy.Config{Kernel: e.k.Kernel, Clock: e.clock, GracefulTerminationTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	e.b = b2
	e.sync(nil)
	if got := e.reals("TCP/10.96.0.10:80"); !slices.Equal(got, []string{"10.244.1.2:8080/1", "10.244.1.3:8080/0"}) {
		t.Fatalf("after restart: %v", got)
	}
	e.clock.Step(time.Minute)
	e.sync(changed())
	if got := e.reals("TCP/10.96.0.10:80"); !slices.Equal(got, []string{"10.244.1.2:8080/1"}) {
		t.Errorf("after the timeout: %v", got)
	}
}

// TestEndConnectionsToVanished: a draining real server of a vanished
// endpoint is deleted at once; another draining one waits.
func TestEndConnectionsToVanished(t *testing.T) {
	const vs = "TCP/10.96.0.10:80"
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080", "10.244.1.4:8080")
	e.sync(nil)
	for _, rs := range []string{"10.244.1.3:8080", "10.244.1.4:8080"} {
		if err := e.k.IPVS.SetConnections(vs, rs, 3, 2); err != nil {
			t.Fatal(err)
		}
	}
	e.eps(web, "10.244.1.2:8080")
	e.sync(changed(web))
	if n := e.b.EndConnectionsTo([]netip.Addr{netip.MustParseAddr("10.244.1.3")}); n != 5 {
		t.Errorf("ended %d connections, want 5", n)
	}
	if got, want := e.reals(vs), []string{"10.244.1.2:8080/1", "10.244.1.4:8080/0"}; !slices.Equal(got, want) {
		t.Errorf("real servers %v, want %v", got, want)
	}
}
