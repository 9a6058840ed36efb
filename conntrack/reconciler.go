package conntrack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Config configures a Reconciler.
type Config struct {
	// Families are the IP families whose tables are cleaned, one pass
	// each. Empty means IPv4 only.
	Families []v1.IPFamily
	// NodeIPs are addresses NodePorts answer on besides the node's own
	// (State.Node.Addresses), e.g. 127.0.0.1 with localhost NodePorts or
	// addresses of --nodeport-addresses that the Node object does not list.
	NodeIPs []netip.Addr
	// Clock times the passes; nil means the real clock.
	Clock clock.PassiveClock
	// Background makes PostSync plan the pass and return: the pass runs
	// on a goroutine of its own, so a sync (and the sync after it) never
	// waits for a walk of a big table (background.go).
	Background bool
}

// Reconciler deletes stale UDP and SCTP conntrack entries after each
// successful sync. It implements proxier.PostSyncHook.
type Reconciler struct {
	table   Table
	cfg     Config
	metrics *metrics.Metrics

	mu sync.Mutex
	// prevKeys are the service addresses of the last sync (plus, after a
	// failed pass, those still to clean); addresses missing from the next
	// State are gone and their entries stale.
	prevKeys keySet
	// retry is set when the last pass failed: the next sync scans whatever
	// its Diff says.
	retry bool
	// sentShare is the share of the table the last wide pass was sent
	// (scope.go); negative until one ran.
	sentShare float64

	// Background passes (background.go): the pass waiting, and whether
	// the goroutine runs.
	bg      sync.Mutex
	queued  *job
	running bool
}

var _ proxier.PostSyncHook = (*Reconciler)(nil)

// New returns a Reconciler that cleans table. m may be nil.
func New(table Table, cfg Config, m *metrics.Metrics) *Reconciler {
	if len(cfg.Families) == 0 {
		cfg.Families = []v1.IPFamily{v1.IPv4Protocol}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Reconciler{table: table, cfg: cfg, metrics: m, sentShare: -1}
}

// PostSync implements proxier.PostSyncHook. Errors are logged and the pass
// is retried after the next sync; they never fail the sync. With
// Config.Background the pass runs after PostSync returns (background.go).
func (r *Reconciler) PostSync(ctx context.Context, st *proxier.State, diff *proxier.Diff) {
	if r.cfg.Background {
		if j, err := r.plan(ctx, st, diff); err != nil {
			klog.ErrorS(err, "Conntrack cleanup failed; retrying after the next sync")
		} else if j != nil {
			r.enqueue(j)
		}
		return
	}
	if _, err := r.Reconcile(ctx, st, diff); err != nil {
		klog.ErrorS(err, "Conntrack cleanup failed; retrying after the next sync")
	}
}

// Reconcile is PostSync that reports, and never in the background: it
// returns the number of entries deleted, and the error of a failed pass.
func (r *Reconciler) Reconcile(ctx context.Context, st *proxier.State, diff *proxier.Diff) (int, error) {
	j, err := r.plan(ctx, st, diff)
	if err != nil || j == nil {
		return 0, err
	}
	return r.run(j)
}

// job is one planned pass: everything it needs, computed from the State
// when it was planned (the pass may run after the next sync has begun).
type job struct {
	families []familyPass
	gone     keySet // redone after a failure
	wide     bool   // a wide pass: it measures the share sent
}

// familyPass is one family's part of a job.
type familyPass struct {
	family v1.IPFamily
	index  serviceIndex
	scope  []ctnetlink.Filter
}

// plan decides, under the lock, whether the sync calls for a pass and
// what it looks at; nil when there is nothing to do. The service
// addresses are remembered for the next sync at once; a failed pass puts
// back the gone ones and makes the next pass wide (run).
func (r *Reconciler) plan(ctx context.Context, st *proxier.State, diff *proxier.Diff) (*job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	nodeIPs := r.nodeIPs(st)
	keys := serviceKeys(st, r.cfg.Families, nodeIPs)
	gone := goneKeys(r.prevKeys, keys, diff, r.cfg.Families, nodeIPs)
	if len(keys) == 0 && len(gone) == 0 {
		// No UDP/SCTP service traffic, now or before: nothing can be stale.
		r.prevKeys, r.retry = keys, false
		return nil, nil
	}
	if !r.needsPass(diff, len(gone) > 0) {
		r.prevKeys = keys
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		r.prevKeys = keys
		r.failLocked(gone)
		return nil, fmt.Errorf("conntrack cleanup: %w", err)
	}
	targets := r.targets(st, diff, gone, nodeIPs)
	j := &job{gone: gone, wide: targets == nil}
	for _, fam := range r.cfg.Families {
		ix := buildIndex(st, fam, nodeIPs, gone)
		if scope := scopeOf(ix, targets, fam); len(ix) > 0 && len(scope) > 0 {
			j.families = append(j.families, familyPass{family: fam, index: ix, scope: scope})
		}
	}
	r.prevKeys, r.retry = keys, false
	return j, nil
}

// failLocked remembers that the pass must be redone, wide, gone
// addresses included.
func (r *Reconciler) failLocked(gone keySet) {
	if r.prevKeys == nil {
		r.prevKeys = keySet{}
	}
	maps.Copy(r.prevKeys, gone)
	r.retry = true
}

// run makes a planned pass: each family's table once.
func (r *Reconciler) run(j *job) (int, error) {
	start := r.cfg.Clock.Now()
	var total, sent int
	var errs []error
	for _, fp := range j.families {
		filter := &staleFilter{index: fp.index, scope: fp.scope}
		passStart := r.cfg.Clock.Now()
		n, err := r.table.Delete(fp.family, filter)
		r.record(fp.family, n, r.cfg.Clock.Since(passStart))
		total, sent = total+n, sent+int(filter.seen.Load())
		if err != nil {
			errs = append(errs, err)
		}
	}
	logPass(total, r.cfg.Clock.Since(start), j)
	err := errors.Join(errs...)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err != nil:
		r.failLocked(j.gone)
	case j.wide:
		r.learn(sent)
	}
	return total, err
}

// logPass logs a pass: its deletes, time and scope ("wide", or how many
// kernel dumps a targeted pass made: one per IPv4 service address and
// port, one per IPv6 protocol and port).
func logPass(deleted int, elapsed time.Duration, j *job) {
	level := klog.Level(4)
	if deleted > 0 {
		level = 2
	}
	scope := "wide"
	if !j.wide {
		n := 0
		for _, fp := range j.families {
			n += len(fp.scope)
		}
		scope = fmt.Sprintf("%d dumps", n)
	}
	klog.V(level).InfoS("Cleaned conntrack entries", "deleted", deleted, "elapsed", elapsed, "scope", scope)
}

// record reports one family's pass, labelled by ip_family as kube-proxy
// does.
func (r *Reconciler) record(family v1.IPFamily, deleted int, elapsed time.Duration) {
	if r.metrics == nil {
		return
	}
	fam := metrics.Family(family)
	r.metrics.ConntrackReconcilerSyncLatency.WithLabelValues(fam).Observe(elapsed.Seconds())
	r.metrics.ConntrackReconcilerDeletedEntriesTotal.WithLabelValues(fam).Add(float64(deleted))
}

// nodeIPs are the addresses NodePorts answer on.
func (r *Reconciler) nodeIPs(st *proxier.State) []netip.Addr {
	out := make([]netip.Addr, 0, len(st.Node.Addresses)+len(r.cfg.NodeIPs))
	out = append(out, st.Node.Addresses...)
	return append(out, r.cfg.NodeIPs...)
}
