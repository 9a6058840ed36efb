package iptables

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// TestKernelServiceTraffic: with --service-traffic-metrics, N TCP
// connections (and N UDP exchanges, each from a new socket) through a
// cluster IP, and through a NodePort, raise the port's connections
// counter by exactly N and its packets
// and bytes; other ports do not move; a deleted Service's series is gone,
// and so are its ipset members. Both iptables backends.
func TestKernelServiceTraffic(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range kernelModes() {
		t.Run(mode, func(t *testing.T) {
			tp := newTopology(t, 2)
			cfg := Config{Families: []v1.IPFamily{v1.IPv4Protocol}, ServiceTraffic: true, CounterSets: IPSetRunner{Netns: tp.node}}
			be := newKernelBackend(t, cfg, mode, tp.node)
			st := trafficState(tp)
			if _, err := be.Sync(context.Background(), st, fullDiff()); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			checkCounted(t, tp, be)
			web := svc("default", "web", "http", v1.ProtocolTCP, 80, webIP).Name
			gone := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{}, Endpoints: st.Endpoints, Node: st.Node}
			for n, sp := range st.Services {
				if n != web {
					gone.Services[n] = sp
				}
			}
			if _, err := be.Sync(context.Background(), gone, &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{web: {}}, Deleted: map[proxier.ServicePortName]*proxier.ServicePort{web: st.Services[web]}, ServicesChanged: true}); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if s, ok := ipsetTraffic(t, be)["default/web:http"]; ok {
				t.Errorf("deleted Service still has a series: %+v", s)
			}
			if out := nsRun(t, tp.node, "ipset", "save", "KUBE-SERVICE-CONNS"); strings.Contains(out, "web:http") {
				t.Errorf("deleted Service still in the set:\n%s", out)
			}
			// --cleanup leaves no set behind.
			if err := be.Cleanup(context.Background()); err != nil {
				t.Fatalf("Cleanup: %v", err)
			}
			if out := nsRun(t, tp.node, "ipset", "list", "-n"); strings.TrimSpace(out) != "" {
				t.Errorf("sets left after Cleanup:\n%s", out)
			}
		})
	}
}

func checkCounted(t *testing.T, tp *testTopology, be *Backend) {
	const n = 40
	nodePort := net.JoinHostPort(topoNodeIP, strconv.Itoa(webNodePort))
	for _, c := range []struct{ network, key, what, addr string }{
		{"tcp", "default/web:http", "the cluster IP", webIP + ":80"},
		{"udp", "default/web:udp", "the cluster IP", webIP + ":80"},
		{"tcp", "default/web:http", "the NodePort", nodePort},
		{"udp", "default/web:udp", "the NodePort", nodePort},
	} {
		before := ipsetTraffic(t, be)
		if _, err := kerneltest.Flows(tp.client, c.network, c.addr, n, []byte("hello\n"), ioTimeout); err != nil {
			t.Fatal(err)
		}
		after := ipsetTraffic(t, be)
		a, b := after[c.key], before[c.key]
		dc, dp, db := a.Connections-b.Connections, a.Packets-b.Packets, a.Bytes-b.Bytes
		t.Logf("%s: %d requests through %s: +%d connections, +%d packets, +%d bytes", c.network, n, c.what, dc, dp, db)
		if dc != n {
			t.Errorf("%s: connections went up by %d, want exactly %d", c.network, dc, n)
		}
		if dp < n || db < dp*20 {
			t.Errorf("%s: packets +%d, bytes +%d: want at least one packet per request and its headers", c.network, dp, db)
		}
		for k, s := range after {
			if k != c.key && s != before[k] {
				t.Errorf("%s counted %+v, was %+v: traffic to %s only", k, s, before[k], c.key)
			}
		}
	}
}

// ipsetTraffic reads the counters, by "namespace/service:port".
func ipsetTraffic(t *testing.T, be *Backend) map[string]metrics.ServiceTrafficSample {
	t.Helper()
	got, err := be.ServiceTraffic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metrics.ServiceTrafficSample{}
	for _, s := range metrics.SumServiceTraffic(got) {
		out[s.Namespace+"/"+s.Service+":"+s.Port] = s
	}
	return out
}
