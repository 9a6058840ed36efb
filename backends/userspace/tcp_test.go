package userspace

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// tcpService syncs one TCP service port with the given endpoints and
// returns its proxy socket's address.
func tcpService(t *testing.T, env *testEnv, affinity int32, eps ...netip.AddrPort) netip.AddrPort {
	t.Helper()
	st := newState()
	name := spName("web", v1.ProtocolTCP)
	addService(st, name, "10.96.0.10", 80, eps...).AffinityTimeoutSeconds = affinity
	env.sync(t, st)
	return env.proxyAddr(t, name, false)
}

// byAddr returns the servers' names in endpoint order (IP, then port),
// the order the round-robin follows.
func byAddr(servers ...*tcpServer) []string {
	s := slices.Clone(servers)
	slices.SortFunc(s, func(a, b *tcpServer) int { return a.addr().Compare(b.addr()) })
	var names []string
	for _, x := range s {
		names = append(names, x.name)
	}
	return names
}

func requests(t *testing.T, addr netip.AddrPort, n int) []string {
	t.Helper()
	var got []string
	for range n {
		answer, err := request(t, addr, "x")
		if err != nil {
			t.Fatalf("request %d: %v", len(got), err)
		}
		name, _, _ := strings.Cut(answer, ":")
		got = append(got, name)
	}
	return got
}

func TestTCPRoundRobinOrder(t *testing.T) {
	env := newTestEnv(t)
	a, b, c := startTCPServer(t, "a"), startTCPServer(t, "b"), startTCPServer(t, "c")
	addr := tcpService(t, env, 0, a.addr(), b.addr(), c.addr())
	order := byAddr(a, b, c)
	want := append(slices.Clone(order), order...)
	if got := requests(t, addr, 6); !slices.Equal(got, want) {
		t.Errorf("endpoints in order %v, want %v", got, want)
	}
}

func TestTCPAffinity(t *testing.T) {
	env := newTestEnv(t)
	a, b := startTCPServer(t, "a"), startTCPServer(t, "b")
	addr := tcpService(t, env, 60, a.addr(), b.addr())
	first := byAddr(a, b)[0]
	if got := requests(t, addr, 4); !slices.Equal(got, []string{first, first, first, first}) {
		t.Errorf("with ClientIP affinity: %v, want every connection on %s", got, first)
	}
	env.clock.Step(time.Minute)
	if got := requests(t, addr, 1); got[0] == first {
		t.Errorf("affinity outlived its timeout: %v", got)
	}
}

// TestTCPHalfClose: a FIN from either side reaches the other while the
// opposite direction keeps flowing.
func TestTCPHalfClose(t *testing.T) {
	env := newTestEnv(t)
	// The client closes first: the server reads to EOF, then answers.
	s := startTCPServer(t, "s")
	addr := tcpService(t, env, 0, s.addr())
	if got, err := request(t, addr, "hello"); err != nil || got != "s:hello" {
		t.Errorf("client half-close: %q, %v; want s:hello", got, err)
	}

	// The endpoint closes first: it greets, half-closes, then reads.
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	heard := make(chan string, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			heard <- err.Error()
			return
		}
		defer c.Close()
		c.Write([]byte("hi"))
		c.CloseWrite()
		data, _ := io.ReadAll(c)
		heard <- string(data)
	}()
	addr = tcpService(t, env, 0, ln.Addr().(*net.TCPAddr).AddrPort())
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if greeting, err := io.ReadAll(c); err != nil || string(greeting) != "hi" {
		t.Fatalf("endpoint half-close: read %q, %v; want hi then EOF", greeting, err)
	}
	c.Write([]byte("bye"))
	c.CloseWrite()
	if got := <-heard; got != "bye" {
		t.Errorf("after the endpoint's FIN the client's data still flows: endpoint heard %q, want bye", got)
	}
}

// TestTCPRefusedEndpointIsSkipped: a refused dial moves on to the next
// endpoint, so clients only ever see live endpoints, still in order.
func TestTCPRefusedEndpointIsSkipped(t *testing.T) {
	env := newTestEnv(t)
	a, b := startTCPServer(t, "a"), startTCPServer(t, "b")
	addr := tcpService(t, env, 0, closedPort(t), a.addr(), b.addr())
	order := byAddr(a, b)
	want := append(slices.Clone(order), order...)
	if got := requests(t, addr, 4); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if n := errorCount(t, env.reg, ReasonDialFailed); n < 1 {
		t.Errorf("dial_failed = %v, want >= 1", n)
	}
}

// TestTCPClosedAtOnce: without endpoints, or when every endpoint refuses,
// the client's connection is closed (reset) at once, never left open.
func TestTCPClosedAtOnce(t *testing.T) {
	tests := []struct {
		name   string
		eps    func(t *testing.T) []netip.AddrPort
		reason string
	}{
		{"no endpoints", func(*testing.T) []netip.AddrPort { return nil }, ReasonNoEndpoints},
		{"every endpoint refuses", func(t *testing.T) []netip.AddrPort {
			return []netip.AddrPort{closedPort(t), closedPort(t)}
		}, ReasonAllEndpointsFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestEnv(t)
			addr := tcpService(t, env, 0, tc.eps(t)...)
			if err := connectAndRead(addr); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("connect and read = %v, want EOF or reset", err)
			}
			if n := errorCount(t, env.reg, tc.reason); n != 1 {
				t.Errorf("%s = %v, want 1", tc.reason, n)
			}
		})
	}
}

// TestTCPMetrics: bytes are counted per direction, the active gauge goes
// back to zero, and a removed service's series are deleted.
func TestTCPMetrics(t *testing.T) {
	env := newTestEnv(t)
	s := startTCPServer(t, "s")
	addr := tcpService(t, env, 0, s.addr())
	if _, err := request(t, addr, "12345"); err != nil {
		t.Fatal(err)
	}
	port := spName("web", v1.ProtocolTCP).String()
	eventually(t, "the connection to end", func() bool {
		v, _ := metricValue(t, env.reg, "switchyard_userspace_active_connections", "service_port", port)
		return v == 0
	})
	for dir, want := range map[string]float64{DirectionToEndpoint: 5, DirectionToClient: 7} {
		if v, _ := metricValue(t, env.reg, "switchyard_userspace_bytes_total", "service_port", port, "direction", dir); v != want {
			t.Errorf("bytes %s = %v, want %v", dir, v, want)
		}
	}
	env.sync(t, newState())
	if _, ok := metricValue(t, env.reg, "switchyard_userspace_bytes_total", "service_port", port, "direction", DirectionToClient); ok {
		t.Errorf("series of a removed service port kept")
	}
}

// connectAndRead connects and reads one byte. The proxy resets the
// connection so quickly that even the connect may see the reset.
func connectAndRead(addr netip.AddrPort) error {
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(addr))
	if err != nil {
		return err
	}
	defer c.Close()
	// A generous deadline only guards against a hang; the close itself
	// is immediate.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = c.Read(make([]byte, 1))
	return err
}

func errorCount(t *testing.T, reg *prometheus.Registry, reason string) float64 {
	v, _ := metricValue(t, reg, "switchyard_userspace_balancer_errors_total", "reason", reason)
	return v
}

// metricValue finds one series by name and label pairs.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}
