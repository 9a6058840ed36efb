package userspace

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// eventLog records, in order, sentinel opens and rule restores.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(e string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

type loggingSockets struct {
	loopbackSockets
	log *eventLog
}

func (s loggingSockets) ListenTransparentTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	s.log.add("sentinel tcp " + addr.String())
	return s.loopbackSockets.ListenTransparentTCP(addr)
}

func (s loggingSockets) ListenTransparentUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	s.log.add("sentinel udp " + addr.String())
	return s.loopbackSockets.ListenTransparentUDP(addr)
}

type loggingRunner struct {
	runner.Interface
	log *eventLog
}

func (r loggingRunner) Restore(ctx context.Context, fam runner.Family, data []byte) error {
	r.log.add("restore")
	return r.Interface.Restore(ctx, fam, data)
}

// TestSentinelOrder: a daemon's first sync writes its rules before it
// opens any sentinel (a predecessor's rules may still REDIRECT marked
// traffic to dead proxy ports); afterwards a new UDP service's sentinel
// opens before the rules that REDIRECT to it, so no datagram takes the
// affinity-less fallback in between, and a new TCP service's after them.
func TestSentinelOrder(t *testing.T) {
	log := &eventLog{}
	env := newTestEnv(t)
	env.b.cfg.Sockets = loggingSockets{log: log}
	env.b.cfg.Runner = loggingRunner{Interface: env.fake, log: log}
	ep := netip.MustParseAddrPort("10.244.1.5:53")
	st := newState()
	addService(st, spName("dns", v1.ProtocolUDP), "10.96.0.10", 53, ep)
	env.sync(t, st)
	if got, want := log.take(), []string{"restore", "sentinel udp 10.96.0.10:53"}; !slices.Equal(got, want) {
		t.Errorf("first sync: %v, want %v", got, want)
	}

	addService(st, spName("syslog", v1.ProtocolUDP), "10.96.0.20", 514, ep)
	addService(st, spName("web", v1.ProtocolTCP), "10.96.0.30", 80, ep)
	env.sync(t, st)
	want := []string{"sentinel udp 10.96.0.20:514", "restore", "sentinel tcp 10.96.0.30:80"}
	if got := log.take(); !slices.Equal(got, want) {
		t.Errorf("later sync: %v, want %v", got, want)
	}
}

// TestNoRestartFallback: without Config.RestartFallback (the default) no
// sentinel is opened, so no service address and port is held on the node
// (a hostNetwork server may bind :80 while a Service has port 80), and
// traffic from outside is REDIRECTed to the proxy without the sentinel's
// mark and without a fallback DNAT to the endpoints.
func TestNoRestartFallback(t *testing.T) {
	log := &eventLog{}
	env := newTestEnv(t, func(c *Config) { c.RestartFallback = false })
	env.b.cfg.Sockets = loggingSockets{log: log}
	env.b.cfg.Runner = loggingRunner{Interface: env.fake, log: log}
	ep := netip.MustParseAddrPort("10.244.1.5:80")
	st := newState()
	addService(st, spName("web", v1.ProtocolTCP), "10.96.0.30", 80, ep)
	addService(st, spName("dns", v1.ProtocolUDP), "10.96.0.10", 53, ep)
	env.sync(t, st)
	if got := log.take(); !slices.Equal(got, []string{"restore"}) {
		t.Errorf("sync: %v, want only the restore (no sentinel)", got)
	}
	nat, err := env.fake.SaveTable(context.Background(), runner.IPv4, "nat")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(nat), "\n") {
		if strings.HasPrefix(l, "-A KUBE-PORTALS-CONTAINER") && (strings.Contains(l, "--mark") || strings.Contains(l, "fallback")) {
			t.Errorf("container rule depends on a sentinel or falls back: %s", l)
		}
	}
	if !strings.Contains(string(nat), "-A KUBE-PORTALS-CONTAINER -d 10.96.0.30/32 -p tcp") {
		t.Errorf("no REDIRECT for the cluster IP:\n%s", nat)
	}
}
