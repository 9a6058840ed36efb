package app

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelExplainTrace runs `switchyard explain --trace` as an
// operator would, inside a namespace where the real backend of each
// host mode programmed a Service: every endpoint shows as a path, rule by
// rule; a Service without endpoints shows the reject. Root and
// SWITCHYARD_KERNEL_TESTS=1.
func TestKernelExplainTrace(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []Mode{ModeIPTables, ModeNFTables} {
		t.Run(string(mode), func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "syex-trace")
			kerneltest.Run(t, "ip", "-n", ns, "addr", "add", "192.168.51.1/24", "dev", "lo")
			programTraceState(t, mode, ns)
			out := traceIn(t, ns, "--proxy-mode="+string(mode), "--trace", "192.168.51.1", "10.96.0.10:80/tcp")
			for _, want := range []string{"from this node", "2 path(s)", "DNAT to 10.244.1.1:8080", "DNAT to 10.244.1.2:8080", "50.0%"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
			t.Logf("explain --trace:\n%s", out)
			out = traceIn(t, ns, "--proxy-mode="+string(mode), "--trace", "192.168.51.1", "10.96.0.20:80/tcp")
			if !strings.Contains(out, "REJECT") {
				t.Errorf("no REJECT in:\n%s", out)
			}
			t.Logf("explain --trace:\n%s", out)
		})
	}
}

// TestKernelExplainTraceUserspace: in userspace mode `explain --trace`
// follows the rules to the proxy socket and shows the endpoints the
// daemon's relay table (served on --metrics-bind-address) names, or says
// the table cannot be read and fails.
func TestKernelExplainTraceUserspace(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "syex-trace")
	kerneltest.Run(t, "ip", "-n", ns, "addr", "add", "192.168.51.1/24", "dev", "lo")
	b := startTraceUserspace(t, ns)
	// The table is served on the host's loopback: the HTTP connection is
	// dialled from a goroutine outside the namespace.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := metricsMux(&Options{Mode: ModeUserspace}, serverHandlers{reg: prometheus.NewRegistry(), relays: b.RelayTable})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Second}
	go srv.Serve(l)
	defer srv.Close()
	args := []string{"--proxy-mode=userspace", "--metrics-bind-address=" + l.Addr().String(), "--trace", "192.168.51.1", "10.96.0.10:80/tcp"}
	out := traceIn(t, ns, args...)
	for _, want := range []string{"userspace mode: 2 path(s)", "relayed to 10.244.1.1:8080 from the node's address", "relayed to 10.244.1.2:8080", "50.0%", "round-robin", "KUBE-PORTALS-HOST"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	t.Logf("explain --trace:\n%s", out)
	srv.Close()
	var failed strings.Builder
	err = kerneltest.InNetns(ns, func() error {
		cmd := newExplainCommand(runExplain, func(string) {})
		cmd.SetArgs(args)
		cmd.SetOut(&failed)
		return cmd.ExecuteContext(context.Background())
	})
	if err == nil || !strings.Contains(err.Error(), "whose endpoints only the daemon knows") {
		t.Errorf("without the relay table: %v\n%s", err, failed.String())
	}
	t.Logf("explain --trace without the relay table: %v", err)
}

// startTraceUserspace runs the userspace backend in ns with the trace
// state.
func startTraceUserspace(t *testing.T, ns string) *userspace.Backend {
	t.Helper()
	r, err := runner.New(runner.Options{Mode: runner.ModeNFT, Netns: ns, WaitSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	sockets, err := userspace.NewNetnsSockets(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sockets.Close() })
	b, err := userspace.New(userspace.Config{Runner: r, Families: []v1.IPFamily{v1.IPv4Protocol}, Sockets: sockets,
		NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.51.1")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.Sync(context.Background(), traceState(), &proxier.Diff{Full: true}); err != nil {
		t.Fatal(err)
	}
	return b
}

// programTraceState syncs web (two endpoints) and empty (none).
func programTraceState(t *testing.T, mode Mode, ns string) {
	t.Helper()
	st := traceState()
	var b proxier.Backend
	var err error
	fams := []v1.IPFamily{v1.IPv4Protocol}
	if mode == ModeIPTables {
		r, rerr := runner.New(runner.Options{Mode: runner.ModeNFT, Netns: ns, WaitSeconds: 60})
		if rerr != nil {
			t.Fatal(rerr)
		}
		b, err = iptables.New(iptables.Config{Runner: r, Families: fams})
	} else {
		b, err = nftables.New(nftables.Config{Conn: nftables.NewNetlinkConn(), Families: fams})
	}
	if err != nil {
		t.Fatal(err)
	}
	err = kerneltest.InNetns(ns, func() error {
		_, err := b.Sync(context.Background(), st, &proxier.Diff{Full: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// traceState is web (10.96.0.10:80, two endpoints) and empty
// (10.96.0.20:80, none).
func traceState() *proxier.State {
	svc := func(name, ip string) *proxier.ServicePort {
		return &proxier.ServicePort{Name: proxier.ServicePortName{Port: "http", Protocol: v1.ProtocolTCP}, Protocol: v1.ProtocolTCP,
			Port: 80, ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)}}
	}
	web, empty := svc("web", "10.96.0.10"), svc("empty", "10.96.0.20")
	web.Name.Namespace, web.Name.Name, empty.Name.Namespace, empty.Name.Name = "default", "web", "default", "empty"
	ep := func(ip string) proxier.Endpoint {
		return proxier.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true}
	}
	return &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{web.Name: web, empty.Name: empty},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{web.Name: {ep("10.244.1.1"), ep("10.244.1.2")}},
	}
}

// traceIn runs the explain command with its real run function in ns.
func traceIn(t *testing.T, ns string, args ...string) string {
	t.Helper()
	var out strings.Builder
	err := kerneltest.InNetns(ns, func() error {
		cmd := newExplainCommand(runExplain, func(string) {})
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		return cmd.ExecuteContext(context.Background())
	})
	if err != nil {
		t.Fatalf("explain %v: %v\n%s", args, err, out.String())
	}
	return out.String()
}
