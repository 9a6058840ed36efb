package nftables_test

import (
	"context"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// TestKernelServiceTraffic: with --service-traffic-metrics, N TCP
// connections (and N UDP exchanges, each from a new socket) through a
// cluster IP, and through a NodePort, raise the port's connections
// counter by exactly N and its packets
// and bytes by at least what was sent; the other ports' counters do not
// move; a deleted Service's series is gone.
func TestKernelServiceTraffic(t *testing.T) {
	kerneltest.Require(t)
	tp := newTrafficTopo(t, 3)
	b, err := nftables.New(nftables.Config{Conn: nftables.NewNetlinkConn(), ServiceTraffic: true})
	if err != nil {
		t.Fatal(err)
	}
	st := trafficState()
	timedSync(t, tp.node, b, st, fullDiff())
	const n = 40
	for _, c := range []struct{ network, what, addr string }{
		{"tcp", "the cluster IP", net.JoinHostPort(webIP, "80")},
		{"udp", "the cluster IP", net.JoinHostPort(webIP, "80")},
		{"tcp", "the NodePort", net.JoinHostPort(nodeIP, webNodePort)},
		{"udp", "the NodePort", net.JoinHostPort(nodeIP, webNodePort)},
	} {
		network := c.network
		before := nodeTraffic(t, tp.node, b)
		var req []byte
		if network == "udp" {
			req = []byte("hello\n")
		}
		if _, err := kerneltest.Flows(tp.client, network, c.addr, n, req, ioTimeout); err != nil {
			t.Fatal(err)
		}
		after := nodeTraffic(t, tp.node, b)
		key := "default/web:" + network
		d := sub(after[key], before[key])
		t.Logf("%s: %d requests through %s: +%d connections, +%d packets, +%d bytes", network, n, c.what, d.Connections, d.Packets, d.Bytes)
		if d.Connections != n {
			t.Errorf("%s: connections went up by %d, want exactly %d", network, d.Connections, n)
		}
		if d.Packets < n || d.Bytes < d.Packets*20 {
			t.Errorf("%s: packets +%d, bytes +%d: want at least one packet per request and its headers", network, d.Packets, d.Bytes)
		}
		for k, s := range after {
			if k != key && s != before[k] {
				t.Errorf("%s counted %+v, was %+v: traffic to %s only", k, s, before[k], key)
			}
		}
	}
	out := run(t, "ip", "netns", "exec", tp.node, "nft", "list", "set", "ip", nftables.TableName, "service-connections")
	if !strings.Contains(out, `comment "default/web:tcp"`) {
		t.Errorf("nft does not show the element's service:\n%s", out)
	}
	web := svcPort("web", v1.ProtocolTCP, webIP, 30080).Name
	gone := cloneState(st)
	delete(gone.Services, web)
	delete(gone.Endpoints, web)
	timedSync(t, tp.node, b, gone, changedDiff(web))
	if s, ok := nodeTraffic(t, tp.node, b)["default/web:tcp"]; ok {
		t.Errorf("deleted Service still has a series: %+v", s)
	}
}

// nodeTraffic reads the counters in ns, by "namespace/service:port".
func nodeTraffic(t *testing.T, ns string, b *nftables.Backend) map[string]metrics.ServiceTrafficSample {
	t.Helper()
	var got []metrics.ServiceTrafficSample
	err := kerneltest.InNetns(ns, func() (err error) {
		got, err = b.ServiceTraffic(context.Background())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metrics.ServiceTrafficSample{}
	for _, s := range metrics.SumServiceTraffic(got) {
		out[s.Namespace+"/"+s.Service+":"+s.Port] = s
	}
	return out
}

func sub(a, b metrics.ServiceTrafficSample) metrics.ServiceTrafficSample {
	return metrics.ServiceTrafficSample{Connections: a.Connections - b.Connections, Packets: a.Packets - b.Packets, Bytes: a.Bytes - b.Bytes}
}
