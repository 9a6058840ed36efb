package main

import (
	"cmp"
	"context"
	"fmt"
	"github.com/switchyard-proxy/switchyard/internal/procstatus"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	kubeclientset "github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// childResult is what one run inside a namespace measured.
type childResult struct {
	FirstSyncBackend time.Duration // the backend's Sync
	FirstSyncTotal   time.Duration // from start, informers' list included
	FirstSyncSys     time.Duration // this process's kernel CPU during it
	RSSAfterFirst    int64         // bytes
	// PeakRSS is VmHWM when the first sync ended: its transient, the
	// informers' list and the fake API server's objects included.
	PeakRSS int64
	// PeakHeap is the most the Go heap's objects (live and not yet
	// collected) were seen to hold up to then, sampled every 5 ms: less
	// sensitive than VmHWM to when the runtime returns pages.
	PeakHeap int64
	// AnonAfterFirst is RssAnon at RSSAfterFirst.
	AnonAfterFirst int64
	// SettledRSS / SettledAnon are VmRSS / RssAnon once the changes were
	// made and childOpts.settled passed (-settled; 0 when not asked).
	SettledRSS, SettledAnon int64
	// FinalPeakRSS is VmHWM at the end of the run.
	FinalPeakRSS int64
	Changes      []change
	NewServices  []change
	Burst        *burstResult `json:",omitempty"`
}

// change is one measured API update.
type change struct {
	Latency time.Duration // API update -> sync done
	Backend time.Duration // the backend's Sync of it
	Sys     time.Duration // kernel CPU of this process meanwhile
	User    time.Duration // own CPU meanwhile (fake API server included)
	Syncs   int           // syncs from the update to the one that wrote it
}

// timedBackend records how long each Sync takes.
type timedBackend struct {
	proxier.Backend
	mu    sync.Mutex
	last  time.Duration
	total time.Duration // of every Sync so far
}

func (t *timedBackend) Sync(ctx context.Context, st *proxier.State, d *proxier.Diff) (proxier.SyncResult, error) {
	start := time.Now()
	res, err := t.Backend.Sync(ctx, st, d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child: sync failed:", err)
	}
	t.mu.Lock()
	t.last = time.Since(start)
	t.total += t.last
	t.mu.Unlock()
	return res, err
}

func (t *timedBackend) lastSync() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

func (t *timedBackend) totalSync() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// syncWatch counts syncs and hands every synced State to whoever waits
// for a condition, and to onSync.
type syncWatch struct {
	mu     sync.Mutex
	syncs  int
	cond   func(*proxier.State) bool
	done   chan struct{}
	onSync func(*proxier.State)
}

func (w *syncWatch) PostSync(_ context.Context, st *proxier.State, _ *proxier.Diff) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.syncs++
	if w.onSync != nil {
		w.onSync(st)
	}
	if w.cond != nil && w.cond(st) {
		w.cond = nil
		close(w.done)
	}
}

func (w *syncWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.syncs
}

// arm sets the condition the next wait waits for.
func (w *syncWatch) arm(cond func(*proxier.State) bool) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cond, w.done = cond, make(chan struct{})
	return w.done
}

// nullBackend programs nothing: a run with it measures the process
// without the nftables backend (the proxier, informers and the fake API
// server with its objects), the baseline of the RSS figure.
type nullBackend struct{}

func (nullBackend) Name() string { return "null" }
func (nullBackend) Sync(context.Context, *proxier.State, *proxier.Diff) (proxier.SyncResult, error) {
	return proxier.SyncResult{}, nil
}
func (nullBackend) Cleanup(context.Context) error { return nil }

// childOpts is what one child measures.
type childOpts struct {
	n, eps, changes, newServices int
	backend                      string // see newBackend; "null" programs nothing
	daemonDefaults               bool   // the daemon's sync periods, else no periodic sync
	burst                        int    // EndpointSlice updates in the burst, 0 for none
	burstOver                    time.Duration
	settle                       time.Duration // after the first sync
	settled                      time.Duration // after the changes, before the settled RSS (0: not read)
	// gap is the pause after each new service is synced before the next
	// is created (0: 50 ms).
	gap time.Duration
}

func runChild(o childOpts) (*childResult, error) {
	// The simple tracker: NewClientset's field-managed one builds a REST
	// mapper on every Update, a third of the process's CPU in a burst of
	// updates at 10k services; a real API server is another process.
	client := fake.NewSimpleClientset(objects(o.n, o.eps)...)
	m := metrics.New(nil)
	var be proxier.Backend = nullBackend{}
	if o.backend != "null" {
		b, err := newBackend(o.backend, m)
		if err != nil {
			return nil, err
		}
		be = b
	}
	cfg := proxier.Config{NodeName: nodeName, SyncPeriod: time.Hour}
	if o.daemonDefaults {
		var err error
		if cfg.MinSyncPeriod, cfg.SyncPeriod, err = daemonPeriods(o.backend); err != nil {
			return nil, err
		}
	}
	tb := &timedBackend{Backend: be}
	w := &syncWatch{}
	p := proxier.New(kubeclientset.New(client), tb, cfg, m, nil, nil, w)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := firstSync(ctx, p, tb, w, o.n)
	if err != nil {
		return nil, err
	}
	time.Sleep(o.settle)
	for i := 0; i < o.changes; i++ {
		// Each change replaces endpoint 0 of another service (7919 is
		// prime: no service repeats before all were changed once).
		c, err := oneEndpointChange(ctx, client, w, tb, (i*7919)%o.n, o.eps, 1+(i/o.n)%3)
		if err != nil {
			return nil, err
		}
		res.Changes = append(res.Changes, c)
		time.Sleep(50 * time.Millisecond)
	}
	for i := 0; i < o.newServices; i++ {
		c, err := newService(ctx, client, w, tb, o.n+i, o.eps)
		if err != nil {
			return nil, err
		}
		res.NewServices = append(res.NewServices, c)
		time.Sleep(cmp.Or(o.gap, 50*time.Millisecond))
	}
	if o.burst > 0 {
		if res.Burst, err = runBurst(ctx, client, w, tb, o); err != nil {
			return nil, err
		}
	}
	if o.settled > 0 {
		time.Sleep(o.settled)
		res.SettledRSS, res.SettledAnon = procStatus("VmRSS:"), procStatus("RssAnon:")
	}
	res.FinalPeakRSS = procStatus("VmHWM:")
	return res, nil
}

// firstSync starts the proxier and waits for the sync that wrote all n
// services, then takes RSS (and profiles when asked).
func firstSync(ctx context.Context, p *proxier.Proxier, tb *timedBackend, w *syncWatch, n int) (*childResult, error) {
	res := &childResult{}
	first := w.arm(func(st *proxier.State) bool { return len(st.Services) == n })
	if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer f.Close()
		}
	}
	sys0, _ := cpu()
	start := time.Now()
	heap := sampleHeapPeak()
	go func() { _ = p.Run(ctx) }()
	if err := wait(first, 10*time.Minute); err != nil {
		return nil, fmt.Errorf("first sync: %w", err)
	}
	res.PeakHeap = heap()
	sys1, _ := cpu()
	res.FirstSyncTotal, res.FirstSyncBackend, res.FirstSyncSys = time.Since(start), tb.lastSync(), sys1-sys0
	res.PeakRSS = procStatus("VmHWM:")
	pprof.StopCPUProfile()
	if path := os.Getenv("BENCH_ALLOCPROFILE"); path != "" {
		// Every allocation since the start (informers' list included).
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	// The daemon returns a full sync's transient memory to the OS right
	// after it (cmd/switchyard/app/memory.go); do the same before reading
	// RSS. The process also holds the fake API server's 2n objects.
	debug.FreeOSMemory()
	res.RSSAfterFirst, res.AnonAfterFirst = procStatus("VmRSS:"), procStatus("RssAnon:")
	if path := os.Getenv("BENCH_HEAPPROFILE"); path != "" {
		runtime.GC()
		if f, err := os.Create(path); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	return res, nil
}

// oneEndpointChange replaces endpoint 0 of service i by a new address.
func oneEndpointChange(ctx context.Context, client *fake.Clientset, w *syncWatch, tb *timedBackend, i, eps, gen int) (change, error) {
	gens := make([]int, eps)
	gens[0] = gen
	slice := sliceObj(i, eps, gens)
	want := endpointIP(i, 0, gen)
	done := w.arm(func(st *proxier.State) bool {
		e := st.Endpoints[portName(i)]
		return len(e) > 0 && hasIP(e, want)
	})
	return measure(w, tb, done, func() error {
		_, err := client.DiscoveryV1().EndpointSlices(benchNS).Update(ctx, slice, metav1.UpdateOptions{})
		return err
	})
}

// newService creates service i and its slice of eps endpoints.
func newService(ctx context.Context, client *fake.Clientset, w *syncWatch, tb *timedBackend, i, eps int) (change, error) {
	done := w.arm(func(st *proxier.State) bool {
		return st.Services[portName(i)] != nil && len(st.Endpoints[portName(i)]) == eps
	})
	return measure(w, tb, done, func() error {
		if _, err := client.CoreV1().Services(benchNS).Create(ctx, serviceObj(i), metav1.CreateOptions{}); err != nil {
			return err
		}
		_, err := client.DiscoveryV1().EndpointSlices(benchNS).Create(ctx, sliceObj(i, eps, make([]int, eps)), metav1.CreateOptions{})
		return err
	})
}

func measure(w *syncWatch, tb *timedBackend, done <-chan struct{}, update func() error) (change, error) {
	syncs0 := w.count()
	sys0, user0 := cpu()
	start := time.Now()
	if err := update(); err != nil {
		return change{}, err
	}
	if err := wait(done, time.Minute); err != nil {
		return change{}, err
	}
	lat := time.Since(start)
	sys1, user1 := cpu()
	return change{Latency: lat, Backend: tb.lastSync(), Sys: sys1 - sys0, User: user1 - user0, Syncs: w.count() - syncs0}, nil
}

func hasIP(eps []proxier.Endpoint, ip netip.Addr) bool {
	for _, e := range eps {
		if e.IP == ip {
			return true
		}
	}
	return false
}

func wait(done <-chan struct{}, limit time.Duration) error {
	select {
	case <-done:
		return nil
	case <-time.After(limit):
		return fmt.Errorf("no matching sync within %v", limit)
	}
}

// cpu is this process's system and user CPU.
func cpu() (sys, user time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Stime.Nano()), time.Duration(ru.Utime.Nano())
}

// procStatus reads a "kB" field of /proc/self/status ("VmRSS:"), in
// bytes (0 when unreadable).
func procStatus(field string) int64 {
	b, _ := procstatus.Bytes(field)
	return b
}
