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
// is retried after the next sync; they never fail the sync.
func (r *Reconciler) PostSync(ctx context.Context, st *proxier.State, diff *proxier.Diff) {
	if _, err := r.Reconcile(ctx, st, diff); err != nil {
		klog.ErrorS(err, "Conntrack cleanup failed; retrying after the next sync")
	}
}

// Reconcile is PostSync that reports: it returns the number of entries
// deleted, and the error of a failed pass.
func (r *Reconciler) Reconcile(ctx context.Context, st *proxier.State, diff *proxier.Diff) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	nodeIPs := r.nodeIPs(st)
	keys := serviceKeys(st, r.cfg.Families, nodeIPs)
	gone := goneKeys(r.prevKeys, keys, diff, r.cfg.Families, nodeIPs)
	if len(keys) == 0 && len(gone) == 0 {
		// No UDP/SCTP service traffic, now or before: nothing can be stale.
		r.prevKeys, r.retry = keys, false
		return 0, nil
	}
	if !r.needsPass(diff, len(gone) > 0) {
		r.prevKeys = keys
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		r.fail(keys, gone)
		return 0, fmt.Errorf("conntrack cleanup: %w", err)
	}
	start := r.cfg.Clock.Now()
	targets := r.targets(st, diff, gone, nodeIPs)
	deleted, err := r.pass(st, nodeIPs, gone, targets)
	logPass(deleted, r.cfg.Clock.Since(start), targets)
	if err != nil {
		r.fail(keys, gone)
		return deleted, err
	}
	r.prevKeys, r.retry = keys, false
	return deleted, nil
}

// fail remembers that the pass must be redone, gone addresses included.
func (r *Reconciler) fail(keys, gone keySet) {
	r.prevKeys = maps.Clone(keys)
	maps.Copy(r.prevKeys, gone)
	r.retry = true
}

// pass cleans each family's table once: the entries of the target
// addresses, or with nil targets every entry of the protocols cleaned
// (scope.go).
func (r *Reconciler) pass(st *proxier.State, nodeIPs []netip.Addr, gone, targets keySet) (int, error) {
	var total, sent int
	var errs []error
	for _, fam := range r.cfg.Families {
		ix := buildIndex(st, fam, nodeIPs, gone)
		filter := &staleFilter{index: ix, scope: scopeOf(ix, targets, fam)}
		if len(ix) == 0 || len(filter.scope) == 0 {
			continue
		}
		start := r.cfg.Clock.Now()
		n, err := r.table.Delete(fam, filter)
		r.record(fam, n, r.cfg.Clock.Since(start))
		total, sent = total+n, sent+int(filter.seen.Load())
		if err != nil {
			errs = append(errs, err)
		}
	}
	if targets == nil && len(errs) == 0 {
		r.learn(sent)
	}
	return total, errors.Join(errs...)
}

// logPass logs a pass: its deletes, time and scope ("wide", or how many
// service addresses a targeted pass looked at).
func logPass(deleted int, elapsed time.Duration, targets keySet) {
	level := klog.Level(4)
	if deleted > 0 {
		level = 2
	}
	scope := "wide"
	if targets != nil {
		scope = fmt.Sprintf("%d addresses", len(targets))
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
