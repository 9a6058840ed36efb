package iptables

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelServiceTrafficCost measures, in one run, what
// --service-traffic-metrics costs at 10k services on iptables-nft: the
// first full sync, a one-endpoint partial sync, the scrape, and TCP
// connections per second through a cluster IP, counters off and on
// (rounds alternate, medians reported). Figures only, no assertion: run
// it with SWITCHYARD_KERNEL_TESTS=1 SWITCHYARD_TRAFFIC_COST=1 -v.
func TestKernelServiceTrafficCost(t *testing.T) {
	kerneltest.Require(t)
	if os.Getenv("SWITCHYARD_TRAFFIC_COST") == "" {
		t.Skip("set SWITCHYARD_TRAFFIC_COST=1 to measure")
	}
	const services, conns, rounds = 10000, 2000, 5
	var tps [2]*testTopology
	var rates [2][]float64
	for i, on := range []bool{false, true} {
		tp := newTopology(t, 2)
		cfg := Config{Families: []v1.IPFamily{v1.IPv4Protocol}, ServiceTraffic: on, CounterSets: IPSetRunner{Netns: tp.node}}
		be := newKernelBackend(t, cfg, runner.ModeNFT, tp.node)
		st := trafficState(tp)
		for i := range services {
			sp := svc("bench", fmt.Sprintf("svc-%05d", i), "http", v1.ProtocolTCP, 80, fmt.Sprintf("10.97.%d.%d", i>>8, i&255))
			st.Services[sp.Name] = sp
			st.Endpoints[sp.Name] = []proxier.Endpoint{ep(fmt.Sprintf("10.245.%d.%d:8080", i>>7, (i<<1)&255)), ep(fmt.Sprintf("10.245.%d.%d:8080", i>>7, (i<<1+1)&255))}
		}
		full := timed(t, func() error { _, err := be.Sync(context.Background(), st, fullDiff()); return err })
		next := &proxier.State{Services: st.Services, Endpoints: maps.Clone(st.Endpoints), Node: st.Node}
		name := spn("bench", "svc-00042", "http", v1.ProtocolTCP)
		next.Endpoints[name] = []proxier.Endpoint{ep("10.245.0.84:8080"), ep("10.246.0.1:8080")}
		partial := timed(t, func() error { _, err := be.Sync(context.Background(), next, changedDiff(false, name)); return err })
		t.Logf("counters %-5v: %d service ports: first full sync %v, one-endpoint partial sync %v", on, len(st.Services), full.Round(time.Millisecond), partial.Round(10*time.Microsecond))
		if on {
			var n int
			scrape := timed(t, func() error { s, err := be.ServiceTraffic(context.Background()); n = len(s); return err })
			t.Logf("scrape: %d samples read in %v", n, scrape.Round(time.Millisecond))
		}
		tps[i] = tp
	}
	for range rounds {
		for i, tp := range tps {
			start := time.Now()
			if _, err := tp.fromClient("tcp", webIP+":80", conns); err != nil {
				t.Fatal(err)
			}
			rates[i] = append(rates[i], conns/time.Since(start).Seconds())
		}
	}
	med := func(xs []float64) float64 { s := slices.Clone(xs); slices.Sort(s); return s[len(s)/2] }
	t.Logf("TCP connections/s through a cluster IP (%d per round, median of %d): off %.0f, on %.0f (on/off %.3f); rounds off %.0f, on %.0f",
		conns, rounds, med(rates[0]), med(rates[1]), med(rates[1])/med(rates[0]), rates[0], rates[1])
}

func timed(t *testing.T, f func() error) time.Duration {
	t.Helper()
	start := time.Now()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}
