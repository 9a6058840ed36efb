package userspace

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// loopbackSockets opens listeners on the loopback address of the
// requested family whatever address the backend asks for, so unit tests
// never listen on the host's real interfaces. Dials are real.
type loopbackSockets struct{ HostSockets }

func loopbackOf(a netip.Addr) netip.Addr {
	if a.Unmap().Is4() {
		return netip.MustParseAddr("127.0.0.1")
	}
	return netip.IPv6Loopback()
}

func (s loopbackSockets) ListenTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	return s.HostSockets.ListenTCP(netip.AddrPortFrom(loopbackOf(addr.Addr()), addr.Port()))
}

func (s loopbackSockets) ListenUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	return s.HostSockets.ListenUDP(netip.AddrPortFrom(loopbackOf(addr.Addr()), addr.Port()))
}

// Sentinels listen on loopback too, on ephemeral ports (services share
// ports).
func (s loopbackSockets) ListenTransparentTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	return s.HostSockets.ListenTCP(netip.AddrPortFrom(loopbackOf(addr.Addr()), 0))
}

func (s loopbackSockets) ListenTransparentUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	return s.HostSockets.ListenUDP(netip.AddrPortFrom(loopbackOf(addr.Addr()), 0))
}

// testEnv is a backend on the strict iptables fake, a fake clock and
// loopback sockets.
type testEnv struct {
	b     *Backend
	fake  *iptablestest.Fake
	clock *clocktesting.FakeClock
	reg   *prometheus.Registry
}

func newTestEnv(t *testing.T, mod ...func(*Config)) *testEnv {
	t.Helper()
	env := &testEnv{fake: iptablestest.NewFake(), clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)),
		reg: prometheus.NewRegistry()}
	cfg := Config{Runner: env.fake, Clock: env.clock, Sockets: loopbackSockets{}, Registerer: env.reg, RestartFallback: true,
		NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.0.10")}, DialTimeout: 10 * time.Second}
	for _, m := range mod {
		m(&cfg)
	}
	b, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	env.b = b
	return env
}

func (env *testEnv) sync(t *testing.T, st *proxier.State) {
	t.Helper()
	if _, err := env.b.Sync(context.Background(), st, &proxier.Diff{Full: true}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// proxyAddr is where a test client reaches a service port's proxy socket.
func (env *testEnv) proxyAddr(t *testing.T, name proxier.ServicePortName, external bool) netip.AddrPort {
	t.Helper()
	port, ok := env.b.ProxyPort(name, v1.IPv4Protocol, external)
	if !ok {
		t.Fatalf("no proxy socket for %s", name)
	}
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port)
}

func spName(name string, proto v1.Protocol) proxier.ServicePortName {
	return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Port: "p", Protocol: proto}
}

func newState() *proxier.State {
	return &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.10")}},
	}
}

// addService adds a service port with a cluster IP and ready endpoints
// given as "ip:port" (local to this node).
func addService(st *proxier.State, name proxier.ServicePortName, clusterIP string, port uint16, eps ...netip.AddrPort) *proxier.ServicePort {
	sp := &proxier.ServicePort{Name: name, Protocol: name.Protocol, Port: port, ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)}}
	st.Services[name] = sp
	setEndpoints(st, name, eps...)
	return sp
}

func setEndpoints(st *proxier.State, name proxier.ServicePortName, eps ...netip.AddrPort) {
	var list []proxier.Endpoint
	for _, ep := range eps {
		list = append(list, proxier.Endpoint{IP: ep.Addr(), Port: ep.Port(), Ready: true, Serving: true, NodeName: "node-a", IsLocal: true})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Key().Compare(list[j].Key()) < 0 })
	st.Endpoints[name] = list
}

// cloneState copies the maps so a test can change a state it synced.
func cloneState(st *proxier.State) *proxier.State {
	out := newState()
	out.Node = st.Node
	for k, v := range st.Services {
		out.Services[k] = v
	}
	for k, v := range st.Endpoints {
		out.Endpoints[k] = v
	}
	return out
}

// tcpServer is an endpoint on loopback: for each connection it reads
// until the client's half-close, then answers "<name>:<what it read>" and
// closes. It records how many connections it saw.
type tcpServer struct {
	name string
	ln   *net.TCPListener
	mu   sync.Mutex
	n    int
}

func startTCPServer(t *testing.T, name string) *tcpServer {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return serveTCP(t, name, ln)
}

// serveTCP runs a tcpServer on a listener (which may live in another
// network namespace).
func serveTCP(t testing.TB, name string, ln *net.TCPListener) *tcpServer {
	s := &tcpServer{name: name, ln: ln}
	t.Cleanup(func() { ln.Close() })
	go s.serve()
	return s
}

func (s *tcpServer) addr() netip.AddrPort { return s.ln.Addr().(*net.TCPAddr).AddrPort() }

// accepted is how many connections the server has accepted.
func (s *tcpServer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *tcpServer) serve() {
	for {
		c, err := s.ln.AcceptTCP()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
		go func() {
			defer c.Close()
			data, _ := io.ReadAll(c)
			c.Write(append([]byte(s.name+":"), data...))
		}()
	}
}

// closedPort returns a loopback address nothing listens on: dials to it
// are refused.
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	ln.Close()
	return ap
}

// request connects to addr, sends msg, half-closes and returns the whole
// answer.
func request(t *testing.T, addr netip.AddrPort, msg string) (string, error) {
	t.Helper()
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(addr))
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	if err := c.CloseWrite(); err != nil {
		return "", err
	}
	out, err := io.ReadAll(c)
	return string(out), err
}

// udpServer is a UDP endpoint on loopback answering "<name>:<datagram>".
type udpServer struct {
	name string
	conn *net.UDPConn
}

func startUDPServer(t *testing.T, name string) *udpServer {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return serveUDP(t, name, c)
}

// serveUDP runs a udpServer on a socket (which may live in another
// network namespace).
func serveUDP(t testing.TB, name string, c *net.UDPConn) *udpServer {
	t.Cleanup(func() { c.Close() })
	s := &udpServer{name: name, conn: c}
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(append([]byte(name+":"), buf[:n]...), from)
		}
	}()
	return s
}

func (s *udpServer) addr() netip.AddrPort { return s.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// udpClient is a client socket connected to the proxy socket: the kernel
// only delivers replies from the address it sent to.
func udpClient(t *testing.T, addr netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func udpExchange(t *testing.T, c *net.UDPConn, msg string) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("udp write: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("udp read: %v", err)
	}
	return string(buf[:n])
}

// eventually polls cond until it holds, failing after a generous bound.
// It waits for an event; it does not assert timing.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
