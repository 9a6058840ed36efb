package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"

	"github.com/spf13/cobra"

	"github.com/switchyard-proxy/switchyard/backends/recording"
	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
	"github.com/switchyard-proxy/switchyard/internal/restmetrics"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// maxHollowCount bounds --count: each hollow node holds its own caches.
const maxHollowCount = 5000

// hollowRequest is what `switchyard hollow` runs besides the options.
type hollowRequest struct {
	Count  int
	Prefix string
	// First is the first node's index: the nodes are Prefix+First ..
	// Prefix+(First+Count-1), so that several processes share out one
	// set of names.
	First int
	Out   io.Writer
}

// check validates the request: a count in range, and node names the API
// accepts.
func (r *hollowRequest) check() error {
	if r.Count < 1 || r.Count > maxHollowCount {
		return fmt.Errorf("--count %d: want 1 to %d", r.Count, maxHollowCount)
	}
	if r.First < 0 {
		return fmt.Errorf("--first-index %d: want 0 or more", r.First)
	}
	last := r.name(r.Count - 1)
	if errs := validation.IsDNS1123Subdomain(last); len(errs) > 0 {
		return fmt.Errorf("--node-name-prefix %q: node name %q: %s", r.Prefix, last, strings.Join(errs, "; "))
	}
	return nil
}

func (r *hollowRequest) name(i int) string { return fmt.Sprintf("%s%d", r.Prefix, r.First+i) }

type hollowFunc func(ctx context.Context, o *Options, req *hollowRequest) error

func newHollowCommand(run hollowFunc, warn func(string)) *cobra.Command {
	flags := defaultRawConfig()
	req := &hollowRequest{}
	cmd := &cobra.Command{
		Use:   "hollow --count N",
		Short: "Run the API side of N nodes' proxies in one process, programming nothing",
		Long: `hollow runs N node proxies in one process, each as the daemon builds its own
(informers, change trackers, snapshots, the sync loop, the shared endpoint
selection), each with its own API connection and watches and its own node name
(<prefix><first> .. <prefix><first+N-1>), against the API server of --kubeconfig or --master.
Their backend programs nothing: it records what it would hold. It never touches
the kernel. It measures what many nodes cost the control plane.

Every completed sync is one line on stdout:
  hollow-sync node=NAME at=UNIX_NANOS full=BOOL changed=N services=N endpoints=N [names=NS/NAME:PORT,...]
(names only for a partial sync of at most 16 service ports), and once every node
has synced once, "hollow-ready count=N heap_live_bytes=B gc_percent=P".
With --profiling, --metrics-bind-address serves pprof (the block and mutex
profiles sampling) and the API clients' request metrics of all the nodes together.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := req.check(); err != nil {
				return err
			}
			opts, _, err := complete(cmd.Flags(), flags, warn)
			if err != nil {
				return err
			}
			if opts.Cleanup || opts.CleanupAfterRollback || opts.InitOnly || flags.WriteConfigTo != "" {
				return errors.New("hollow programs nothing: --cleanup, --cleanup-after-rollback, --init-only and --write-config-to do not apply")
			}
			req.Out = cmd.OutOrStdout()
			return run(cmd.Context(), opts, req)
		},
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.IntVar(&req.Count, "count", 1, "how many hollow nodes to run")
	fs.StringVar(&req.Prefix, "node-name-prefix", "hollow-node-", "the hollow nodes' names are this prefix and an index from --first-index")
	fs.IntVar(&req.First, "first-index", 0, "the first hollow node's index")
	flags.addFlags(fs)
	addLoggingFlags(fs)
	return cmd
}

// runHollow runs req.Count hollow nodes until ctx ends or one fails.
func runHollow(ctx context.Context, o *Options, req *hollowRequest) error {
	restmetrics.Install()
	return runHollowNodes(ctx, o, req, hollowClient)
}

// runHollowNodes is runHollow with the API clients from newClient (one
// per node).
func runHollowNodes(ctx context.Context, o *Options, req *hollowRequest, newClient func(*Options) (kubeapi.Client, error)) error {
	hollowFamilies(o)
	rep := newHollowReporter(req.Out, req.Count)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for i := range req.Count {
		name := req.name(i)
		client, err := newClient(o)
		if err != nil {
			cancel(err)
			break
		}
		p := newHollowNode(o, client, name, rep)
		wg.Go(func() { recordStart(ctx, client, name) })
		wg.Go(func() {
			if err := p.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				cancel(fmt.Errorf("hollow node %s: %w", name, err))
			}
		})
	}
	if o.EnableProfiling && o.MetricsBindAddress != "" {
		profileContention()
		wg.Go(func() { serveHollowMetrics(ctx, o) })
	}
	klog.InfoS("Hollow nodes started", "count", req.Count, "prefix", req.Prefix)
	<-ctx.Done()
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// serveHollowMetrics serves, with --profiling, the daemon's metrics server
// on --metrics-bind-address: pprof, and the API clients' request metrics
// of every hollow node together. A failure is logged: the nodes run on.
func serveHollowMetrics(ctx context.Context, o *Options) {
	reg := metrics.NewRegistry()
	reg.MustRegister(restmetrics.Collectors()...)
	if err := serveMetrics(ctx, o, serverHandlers{reg: reg}); err != nil {
		klog.ErrorS(err, "Hollow metrics server failed", "address", o.MetricsBindAddress)
	}
}

// profileContention turns on, with --profiling, the block and mutex
// profiles (/debug/pprof/block and /debug/pprof/mutex): where the nodes'
// goroutines wait is what a slow start is made of. One sample per 10 µs
// blocked and one in 10 mutex contentions keep their cost small.
func profileContention() {
	runtime.SetBlockProfileRate(int((10 * time.Microsecond).Nanoseconds()))
	runtime.SetMutexProfileFraction(10)
}

// hollowFamilies: without a node to read them from (the kernel is not
// probed), the hollow nodes serve the configured primary family, IPv4
// when none is.
func hollowFamilies(o *Options) {
	if o.PrimaryFamily == "" {
		o.PrimaryFamily = v1.IPv4Protocol
	}
	if len(o.Families) == 0 {
		o.Families = []v1.IPFamily{o.PrimaryFamily}
	}
}

// hollowClient is a hollow node's API client, with a connection of its
// own as a node has: a dialer of its own keeps client-go from sharing one
// transport between the nodes.
func hollowClient(o *Options) (kubeapi.Client, error) {
	cfg, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return kubeapi.New(cfg)
}

// newHollowNode builds one hollow node's proxier as the daemon builds its
// own (newNodeProxier), with the recording backend, its own metrics and
// health state, and no health-check node ports.
func newHollowNode(o *Options, client kubeapi.Client, name string, rep *hollowReporter) *proxier.Proxier {
	_, m := newMetrics(o)
	backend := recording.New(o.Families, func(s recording.Sync) { rep.synced(name, s) })
	return newNodeProxier(o, client, name, backend, m, newProxierHealth(o, m), nil)
}

// hollowReporter writes the hollow nodes' syncs, one line each, and
// settles the process's memory once every node has synced once.
type hollowReporter struct {
	mu      sync.Mutex
	out     io.Writer
	count   int
	synced1 map[string]bool
	ready   bool
	// settle runs once every node has synced (settleHollowMemory).
	settle func(n int) (live uint64, percent int)
}

func newHollowReporter(out io.Writer, count int) *hollowReporter {
	return &hollowReporter{out: out, count: count, synced1: map[string]bool{}, settle: settleHollowMemory}
}

func (r *hollowReporter) synced(node string, s recording.Sync) {
	r.mu.Lock()
	defer r.mu.Unlock()
	line := fmt.Sprintf("hollow-sync node=%s at=%d full=%t changed=%d services=%d endpoints=%d",
		node, s.At.UnixNano(), s.Full, s.Changed, s.Services, s.Endpoints)
	if len(s.Names) > 0 {
		line += " names=" + strings.Join(s.Names, ",")
	}
	fmt.Fprintln(r.out, line)
	if r.ready {
		return
	}
	r.synced1[node] = true
	if len(r.synced1) < r.count {
		return
	}
	r.ready = true
	r.synced1 = nil
	live, percent := r.settle(r.count)
	fmt.Fprintf(r.out, "hollow-ready count=%d heap_live_bytes=%d gc_percent=%d\n", r.count, live, percent)
}

// settleHollowMemory does for the process what the daemon does after its
// first full sync, scaled to n nodes: memory handed back to the OS, and,
// unless GOGC is set, the GC percent a daemon would pick from its own
// live heap (steadyPercent of the heap per node), so the heap each node
// may grow beside its live one is the daemon's. It returns the live heap
// and the percent (-1: GOGC's).
func settleHollowMemory(n int) (uint64, int) {
	debug.FreeOSMemory()
	live := liveHeap()
	if gogcSet() {
		return live, -1
	}
	percent := steadyPercent(live / uint64(max(n, 1)))
	debug.SetGCPercent(percent)
	return live, percent
}
