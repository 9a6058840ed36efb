package nftables_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelServiceTrafficCost measures, in one run, what
// --service-traffic-metrics costs at 10k services (plus the traffic
// State's): the first full sync, a one-endpoint partial sync, the scrape,
// and TCP connections per second through a cluster IP, counters off and on
// (rounds alternate, medians reported). Figures only, no assertion: run
// it with SWITCHYARD_KERNEL_TESTS=1 SWITCHYARD_TRAFFIC_COST=1 -v.
// docs/service-traffic-metrics.md has the figures.
func TestKernelServiceTrafficCost(t *testing.T) {
	kerneltest.Require(t)
	if os.Getenv("SWITCHYARD_TRAFFIC_COST") == "" {
		t.Skip("set SWITCHYARD_TRAFFIC_COST=1 to measure")
	}
	const services, conns, rounds = 10000, 2000, 5
	type side struct {
		tp   *trafficTopo
		rate []float64
	}
	var sides [2]side
	for i, on := range []bool{false, true} {
		tp := newTrafficTopo(t, 3)
		b, err := nftables.New(nftables.Config{Conn: nftables.NewNetlinkConn(), ServiceTraffic: on})
		if err != nil {
			t.Fatal(err)
		}
		st := withExtraServices(trafficState(), services)
		_, full := timedSync(t, tp.node, b, st, fullDiff())
		next, name := moveOneEndpoint(st)
		_, partial := timedSync(t, tp.node, b, next, changedDiff(name))
		t.Logf("counters %-5v: %d service ports: first full sync %v, one-endpoint partial sync %v", on, len(st.Services), full.Round(time.Millisecond), partial.Round(10*time.Microsecond))
		if on {
			var n int
			start := time.Now()
			err := kerneltest.InNetns(tp.node, func() error {
				s, err := b.ServiceTraffic(context.Background())
				n = len(s)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("scrape: %d samples read in %v", n, time.Since(start).Round(time.Millisecond))
		}
		sides[i].tp = tp
	}
	for range rounds {
		for i := range sides {
			start := time.Now()
			spread(t, sides[i].tp.client, "tcp", net.JoinHostPort(webIP, "80"), conns, "")
			sides[i].rate = append(sides[i].rate, conns/time.Since(start).Seconds())
		}
	}
	off, on := median(sides[0].rate), median(sides[1].rate)
	t.Logf("TCP connections/s through a cluster IP (%d per round, median of %d): off %.0f, on %.0f (on/off %.3f); rounds off %v, on %v",
		conns, rounds, off, on, on/off, rounded(sides[0].rate), rounded(sides[1].rate))
}

// withExtraServices adds n services (10.97.0.0/16, two endpoints each, on
// another node) to st.
func withExtraServices(st *proxier.State, n int) *proxier.State {
	for i := range n {
		name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc-%05d", i)}, Port: "http", Protocol: v1.ProtocolTCP}
		st.Services[name] = &proxier.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: 80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)})}}
		var eps []proxier.Endpoint
		for j := range 2 {
			eps = append(eps, proxier.Endpoint{IP: netip.AddrFrom4([4]byte{10, 245, byte(i >> 7), byte(i<<1 + j)}), Port: 8080, NodeName: "node-b", Ready: true, Serving: true})
		}
		st.Endpoints[name] = eps
	}
	return st
}

// moveOneEndpoint gives st with one bench service's second endpoint
// replaced.
func moveOneEndpoint(st *proxier.State) (*proxier.State, proxier.ServicePortName) {
	next := cloneState(st)
	name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: "svc-00042"}, Port: "http", Protocol: v1.ProtocolTCP}
	eps := slices.Clone(next.Endpoints[name])
	eps[1].IP = netip.MustParseAddr("10.246.0.1")
	next.Endpoints[name] = eps
	return next, name
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}
