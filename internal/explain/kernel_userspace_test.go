package explain

import (
	"context"
	"net"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// killableSockets opens the proxy's sockets in the node namespace and
// keeps its listeners, so a test can close them under the running
// backend, as a SIGKILLed daemon's die, rules left in place.
type killableSockets struct {
	*userspace.NetnsSockets
	mu        sync.Mutex
	listeners []*net.TCPListener
}

func (s *killableSockets) ListenTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	l, err := s.NetnsSockets.ListenTCP(addr)
	if err == nil {
		s.mu.Lock()
		s.listeners = append(s.listeners, l)
		s.mu.Unlock()
	}
	return l, err
}

func (s *killableSockets) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listeners {
		l.Close()
	}
}

// userspaceDaemon is the userspace backend running in the node
// namespace, its relay table served as the daemon serves it.
type userspaceDaemon struct {
	sockets *killableSockets
	relays  *HTTPRelays
}

func startUserspace(t *testing.T, ns, mode string, objs ...Objects) *userspaceDaemon {
	t.Helper()
	r, err := runner.New(runner.Options{Mode: mode, Netns: ns, WaitSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	nss, err := userspace.NewNetnsSockets(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nss.Close() })
	d := &userspaceDaemon{sockets: &killableSockets{NetnsSockets: nss}}
	b, err := userspace.New(userspace.Config{Runner: r, Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: ktDetector,
		Sockets: d.sockets, NodeIPs: []netip.Addr{netip.MustParseAddr(ktNodeIP)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.Sync(context.Background(), combined(objs...), fullDiff()); err != nil {
		t.Fatal(err)
	}
	// The table is served in the test's own namespace, on loopback: the
	// reader's HTTP connection is dialled from a goroutine that is not
	// in the node's namespace.
	srv := httptest.NewServer(userspace.RelayTableHandler(b.RelayTable))
	t.Cleanup(srv.Close)
	d.relays = &HTTPRelays{URL: srv.URL + userspace.RelayTablePath, Client: srv.Client()}
	return d
}

// userspaceMode reads the node's rules, sockets and the daemon's table as
// explain does.
func (d *userspaceDaemon) mode(mode string) kernelMode {
	return kernelMode{name: "userspace-" + mode, read: func(ns string, fams []v1.IPFamily, local []netip.Addr) (Dataplane, error) {
		r, err := runner.New(runner.Options{Mode: mode, Netns: ns, WaitSeconds: 60})
		if err != nil {
			return nil, err
		}
		var exists TableExists
		if mode == runner.ModeLegacy {
			exists = LegacyTableExists
		}
		rules, err := ReadIPTables(context.Background(), "userspace", r, fams, exists, local)
		if err != nil {
			return nil, err
		}
		sockets, err := ReadSockets()
		if err != nil {
			return nil, err
		}
		return ReadUserspace(context.Background(), UserspaceConfig{Rules: rules, Listeners: sockets, Relays: d.relays}), nil
	}}
}

// TestKernelExplainUserspace: in userspace mode, explain follows the
// rules to the daemon's proxy socket and names the endpoints it relays
// to, which are the ones real connections reach, from the node to the
// cluster IP and from a client to the NodePort; a Service without
// endpoints is refused by both; an endpoint the API gained since the
// sync is missing and answers nobody; when the proxy's listeners die
// with the rules left in place, explain says nothing listens and
// connections are indeed refused; an unreachable relay table is said so.
func TestKernelExplainUserspace(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			kn := newKernelNode(t)
			web, empty := kernelObjects(ktEPs)
			d := startUserspace(t, kn.node, mode, web, empty)
			m := d.mode(mode)
			checkWeb(t, kn, explainIn(t, kn.node, m, web))
			checkEmpty(t, kn, explainIn(t, kn.node, m, empty))
			grown, _ := kernelObjects(ktEPs + 1)
			checkGrown(t, kn, explainIn(t, kn.node, m, grown))

			served := *d.relays
			gone := httptest.NewServer(nil)
			gone.Close()
			d.relays.URL = gone.URL + userspace.RelayTablePath
			checkNoTable(t, explainIn(t, kn.node, m, web))
			*d.relays = served
			d.sockets.kill()
			checkKilled(t, kn, explainIn(t, kn.node, m, web))
		})
	}
}

func checkNoTable(t *testing.T, rep Report) {
	c := rep.Ports[0].Checks[0]
	if c.OK() || c.Err == nil || len(c.Reached) != 0 {
		t.Errorf("without the relay table:\n%s", text(rep, false))
	}
	t.Logf("explain without the daemon's relay table:\n%s", text(rep, false))
}

func checkKilled(t *testing.T, kn *kernelNode, rep Report) {
	for _, c := range rep.Ports[0].Checks {
		if c.OK() || c.Refused < 0.999 || len(c.Reached) != 0 {
			t.Errorf("%s after the listeners died:\n%s", c.Kind, text(rep, false))
		}
	}
	if got, refused := reached(t, kn.node, "10.96.0.10:80", 3); !refused || len(got) > 0 {
		t.Errorf("cluster IP after the listeners died: reached %v, refused %v", got, refused)
	}
	if got, refused := reached(t, kn.client, ktNodeIP+":30080", 3); !refused || len(got) > 0 {
		t.Errorf("NodePort after the listeners died: reached %v, refused %v", got, refused)
	}
	t.Logf("explain after the proxy's listeners died:\n%s", text(rep, false))
}
