package ipvs_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/ipvs"

	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// TestServiceTrafficFromIPVSStats: each virtual server's stats count for
// the port that wrote it (cluster IP and NodePort added up), read at each
// call; a deleted Service's series is gone.
func TestServiceTrafficFromIPVSStats(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80, func(sp *proxier.ServicePort) { sp.NodePort = 30080 })
	e.eps(web, "10.244.0.5:8080")
	e.sync(full())
	for key, s := range map[string]ipvs.SvcStats{
		"TCP/10.96.0.10:80":      {Connections: 3, PacketsIn: 30, BytesIn: 3000, PacketsOut: 99},
		"TCP/192.168.0.10:30080": {Connections: 1, PacketsIn: 10, BytesIn: 1000},
	} {
		if err := e.k.IPVS.SetStats(key, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.b.ServiceTraffic(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []metrics.ServiceTrafficSample{{Namespace: "ns", Service: "web", Port: "p", Protocol: "TCP", Family: "IPv4", Connections: 4, Packets: 40, Bytes: 4000}}
	if d := cmp.Diff(want, metrics.SumServiceTraffic(got)); d != "" {
		t.Errorf("samples (-want +got):\n%s", d)
	}
	delete(e.state.Services, web)
	delete(e.state.Endpoints, web)
	e.sync(changed(web))
	if got, _ := e.b.ServiceTraffic(context.Background()); len(got) != 0 {
		t.Errorf("after the Service went: %+v", got)
	}
}
