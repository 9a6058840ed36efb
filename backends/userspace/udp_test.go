package userspace

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

var udpName = spName("dns", v1.ProtocolUDP)

// udpService syncs the UDP service port with the given endpoints and
// returns its proxy socket's address.
func udpService(t *testing.T, env *testEnv, eps ...netip.AddrPort) netip.AddrPort {
	t.Helper()
	st := newState()
	addService(st, udpName, "10.96.0.53", 53, eps...)
	env.sync(t, st)
	return env.proxyAddr(t, udpName, false)
}

func udpOrder(servers ...*udpServer) []*udpServer {
	s := slices.Clone(servers)
	slices.SortFunc(s, func(a, b *udpServer) int { return a.addr().Compare(b.addr()) })
	return s
}

// from returns the name of the server that answered.
func from(answer string) string {
	name, _, _ := strings.Cut(answer, ":")
	return name
}

func (env *testEnv) udpProxy(t *testing.T) *udpProxy {
	t.Helper()
	env.b.mu.Lock()
	defer env.b.mu.Unlock()
	return env.b.relays.sockets[socketKey{name: udpName, family: v1.IPv4Protocol}].(*udpProxy)
}

// TestUDPSessionsAndReplies: each client address gets a session on the
// next endpoint in order; its later datagrams stay on it; replies come
// back from the proxy socket the client sent to (the connected client
// sockets accept nothing else).
func TestUDPSessionsAndReplies(t *testing.T) {
	env := newTestEnv(t)
	order := udpOrder(startUDPServer(t, "a"), startUDPServer(t, "b"), startUDPServer(t, "c"))
	addr := udpService(t, env, order[0].addr(), order[1].addr(), order[2].addr())
	var clients []*net.UDPConn
	for i := range 3 {
		c := udpClient(t, addr)
		clients = append(clients, c)
		if got, want := udpExchange(t, c, "q1"), order[i].name+":q1"; got != want {
			t.Errorf("client %d: %q, want %q", i, got, want)
		}
	}
	for i, c := range clients {
		if got := from(udpExchange(t, c, "q2")); got != order[i].name {
			t.Errorf("client %d's second datagram went to %s, want its session's %s", i, got, order[i].name)
		}
	}
	if n := env.udpProxy(t).active(); n != 3 {
		t.Errorf("%d sessions, want 3", n)
	}
	port := udpName.String()
	if v, _ := metricValue(t, env.reg, "switchyard_userspace_active_connections", "service_port", port); v != 3 {
		t.Errorf("active_connections = %v, want 3", v)
	}
	// The relay counts a datagram after sending it on: the endpoint's
	// reply can reach the client first.
	eventually(t, "12 bytes to endpoints", func() bool {
		v, _ := metricValue(t, env.reg, "switchyard_userspace_bytes_total", "service_port", port, "direction", DirectionToEndpoint)
		return v == 12
	})
}

// TestUDPIdleTimeout: a session idle for the timeout ends; the client's
// next datagram starts a new session on the next endpoint.
func TestUDPIdleTimeout(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.UDPIdleTimeout = time.Second })
	order := udpOrder(startUDPServer(t, "a"), startUDPServer(t, "b"))
	addr := udpService(t, env, order[0].addr(), order[1].addr())
	c := udpClient(t, addr)
	if got := from(udpExchange(t, c, "q")); got != order[0].name {
		t.Fatalf("first datagram to %s, want %s", got, order[0].name)
	}
	env.clock.Step(999 * time.Millisecond)
	if got := from(udpExchange(t, c, "q")); got != order[0].name {
		t.Fatalf("before the timeout the session moved to %s", got)
	}
	p := env.udpProxy(t)
	env.clock.Step(time.Second)
	eventually(t, "the idle session to end", func() bool { return p.active() == 0 })
	if got := from(udpExchange(t, c, "q")); got != order[1].name {
		t.Errorf("after the idle timeout: %s, want a new session on %s", got, order[1].name)
	}
}

// TestUDPEndpointRemovalResetsSessions: sessions to a removed endpoint
// end, others stay.
func TestUDPEndpointRemovalResetsSessions(t *testing.T) {
	env := newTestEnv(t)
	order := udpOrder(startUDPServer(t, "a"), startUDPServer(t, "b"), startUDPServer(t, "c"))
	addr := udpService(t, env, order[0].addr(), order[1].addr(), order[2].addr())
	c1, c2 := udpClient(t, addr), udpClient(t, addr)
	udpExchange(t, c1, "q") // -> order[0]
	udpExchange(t, c2, "q") // -> order[1]

	st := newState()
	addService(st, udpName, "10.96.0.53", 53, order[1].addr(), order[2].addr())
	env.sync(t, st)
	p := env.udpProxy(t)
	eventually(t, "the removed endpoint's session to end", func() bool { return p.active() == 1 })
	if got := from(udpExchange(t, c2, "q")); got != order[1].name {
		t.Errorf("session to a kept endpoint moved to %s", got)
	}
	if got := from(udpExchange(t, c1, "q")); got != order[2].name {
		t.Errorf("client of the removed endpoint: %s, want a new session on %s", got, order[2].name)
	}
}

func TestUDPNoEndpointsDrops(t *testing.T) {
	env := newTestEnv(t)
	addr := udpService(t, env)
	c := udpClient(t, addr)
	c.Write([]byte("q"))
	eventually(t, "the datagram to be counted as dropped", func() bool {
		return errorCount(t, env.reg, ReasonNoEndpoints) == 1
	})
	if n := env.udpProxy(t).active(); n != 0 {
		t.Errorf("%d sessions without endpoints", n)
	}
}

// TestUDPRefusedEndpoint: an endpoint answering with ICMP port
// unreachable loses its session; the client's next datagram goes to the
// next endpoint.
func TestUDPRefusedEndpoint(t *testing.T) {
	env := newTestEnv(t)
	live := startUDPServer(t, "live")
	dead := startUDPServer(t, "dead")
	deadAddr := dead.addr()
	dead.conn.Close() // datagrams to it now draw ICMP port unreachable
	addr := udpService(t, env, deadAddr, live.addr())
	c := udpClient(t, addr)
	buf := make([]byte, 64)
	eventually(t, "an answer from the live endpoint", func() bool {
		c.Write([]byte("q"))
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := c.Read(buf)
		return err == nil && from(string(buf[:n])) == "live"
	})
	if deadAddr.Compare(live.addr()) < 0 && errorCount(t, env.reg, ReasonEndpointRefused) < 1 {
		t.Errorf("endpoint_refused not counted")
	}
}

// TestUDPCloseEndsSessions: closing the backend ends every session.
func TestUDPCloseEndsSessions(t *testing.T) {
	env := newTestEnv(t)
	s := startUDPServer(t, "a")
	addr := udpService(t, env, s.addr())
	udpExchange(t, udpClient(t, addr), "q")
	p := env.udpProxy(t)
	env.b.Close()
	if n := p.active(); n != 0 {
		t.Errorf("%d sessions after Close", n)
	}
}
