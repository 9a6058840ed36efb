package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// burstResult is a burst of EndpointSlice updates spread evenly over a
// span (issue 16: 1000 over 10 s at 10k services).
type burstResult struct {
	Updates   int
	Wall      time.Duration   // first update to the sync that wrote the last one
	CPU       time.Duration   // user+sys of this process and its children meanwhile
	ChildCPU  time.Duration   // of which the children (iptables-restore)
	SyncTime  time.Duration   // spent in the backend's Sync meanwhile
	Syncs     int             // syncs meanwhile
	Latencies []time.Duration // per update, to the end of the sync that wrote it
}

// burstUpdate is an update sent and not yet seen in a synced State.
type burstUpdate struct {
	name proxier.ServicePortName
	ip   netip.Addr
	sent time.Time
}

// runBurst sends o.burst one-endpoint updates, one every o.burstOver /
// o.burst, each to another service, and times each until the end of the
// first sync whose State holds it.
func runBurst(ctx context.Context, client *fake.Clientset, w *syncWatch, tb *timedBackend, o childOpts) (*burstResult, error) {
	var mu sync.Mutex
	pending := map[int]burstUpdate{}
	res := &burstResult{Updates: o.burst}
	all := make(chan struct{})
	w.mu.Lock()
	w.onSync = func(st *proxier.State) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for k, u := range pending {
			if hasIP(st.Endpoints[u.name], u.ip) {
				res.Latencies = append(res.Latencies, now.Sub(u.sent))
				delete(pending, k)
			}
		}
		if len(res.Latencies) == o.burst && len(pending) == 0 {
			close(all)
			w.onSync = nil // called with w.mu held
		}
	}
	w.mu.Unlock()
	if path := os.Getenv("BENCH_BURST_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer f.Close()
			defer pprof.StopCPUProfile()
		}
	}
	syncs0, sync0 := w.count(), tb.totalSync()
	cpu0, kids0 := cpuWithChildren()
	start := time.Now()
	for i := 0; i < o.burst; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * o.burstOver / time.Duration(o.burst))))
		svc := (i * 7919) % o.n
		gens := make([]int, o.eps)
		gens[0] = 3
		mu.Lock()
		pending[i] = burstUpdate{name: portName(svc), ip: endpointIP(svc, 0, 3), sent: time.Now()}
		mu.Unlock()
		if _, err := client.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, sliceObj(svc, o.eps, gens), metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("burst update %d: %w", i, err)
		}
	}
	if err := wait(all, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("burst: %w", err)
	}
	cpu1, kids1 := cpuWithChildren()
	res.Wall, res.CPU, res.ChildCPU = time.Since(start), cpu1-cpu0, kids1-kids0
	res.SyncTime, res.Syncs = tb.totalSync()-sync0, w.count()-syncs0
	return res, nil
}

// cpuWithChildren is the user+sys CPU of this process and of its
// waited-for children (iptables-restore, iptables-save), and the
// children's part.
func cpuWithChildren() (all, children time.Duration) {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	children = time.Duration(kids.Utime.Nano() + kids.Stime.Nano())
	return children + time.Duration(self.Utime.Nano()+self.Stime.Nano()), children
}
