package userspace

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestUDPSessionCap: with a cap of 2, a third client's datagrams are
// dropped and counted (no session, no endpoint sees them) while the two
// sessions live; once one ends, the third client gets a session.
func TestUDPSessionCap(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.UDPMaxSessions = 2; c.UDPIdleTimeout = time.Second })
	srv := startUDPServer(t, "a")
	addr := udpService(t, env, srv.addr())
	c1, c2, c3 := udpClient(t, addr), udpClient(t, addr), udpClient(t, addr)
	udpExchange(t, c1, "q")
	udpExchange(t, c2, "q")
	port := udpName.String()
	dropped := func() float64 {
		v, _ := metricValue(t, env.reg, "switchyard_userspace_udp_sessions_dropped_total", "service_port", port)
		return v
	}
	if v, ok := metricValue(t, env.reg, "switchyard_userspace_udp_sessions_dropped_total", "service_port", port); !ok || v != 0 {
		t.Fatalf("dropped before the cap = %v (%v), want 0, present", v, ok)
	}
	for range 3 {
		if _, err := c3.Write([]byte("over")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "three dropped datagrams", func() bool { return dropped() == 3 })
	p := env.udpProxy(t)
	if n := p.active(); n != 2 {
		t.Errorf("%d sessions at the cap, want 2", n)
	}
	// c3 got nothing: its next read would be the reply to "q" below.
	c3.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := c3.Read(make([]byte, 64)); err == nil {
		t.Errorf("a dropped client got a reply (%d bytes)", n)
	}

	// c1 keeps its session alive, c2's idles out: c3 gets the free slot.
	env.clock.Step(600 * time.Millisecond)
	udpExchange(t, c1, "keep")
	env.clock.Step(600 * time.Millisecond)
	eventually(t, "c2's idle session to end", func() bool { return p.active() == 1 })
	if got := udpExchange(t, c3, "q"); got != "a:q" {
		t.Errorf("after a slot freed: %q, want a:q", got)
	}
	if v := dropped(); v != 3 {
		t.Errorf("dropped = %v after the slot freed, want still 3", v)
	}
}

var capTCPName = spName("web", v1.ProtocolTCP)

// TestUDPSessionCapDefaultAndOff: 0 means DefaultUDPMaxSessions; a
// negative cap means none. TCP service ports get no drop series.
func TestUDPSessionCapDefaultAndOff(t *testing.T) {
	cfg, err := Config{Runner: newTestEnv(t).fake}.withDefaults()
	if err != nil || cfg.UDPMaxSessions != DefaultUDPMaxSessions {
		t.Errorf("default cap %d (%v), want %d", cfg.UDPMaxSessions, err, DefaultUDPMaxSessions)
	}
	env := newTestEnv(t, func(c *Config) { c.UDPMaxSessions = -1 })
	srv := startUDPServer(t, "a")
	addr := udpService(t, env, srv.addr())
	for i := range 5 {
		if got := udpExchange(t, udpClient(t, addr), "q"); got != "a:q" {
			t.Errorf("client %d without a cap: %q", i, got)
		}
	}
	st := newState()
	addService(st, capTCPName, "10.96.0.10", 80, startTCPServer(t, "t").addr())
	env.sync(t, st)
	if _, ok := metricValue(t, env.reg, "switchyard_userspace_udp_sessions_dropped_total", "service_port", capTCPName.String()); ok {
		t.Errorf("a TCP service port has a UDP drop series")
	}
}
