package proxier

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
	"github.com/switchyard-proxy/switchyard/internal/synctrace"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// HealthUpdater is told when a sync is queued and when one succeeded; the
// /healthz and /livez server implements it.
type HealthUpdater interface {
	QueuedUpdate()
	Updated()
	SyncNode(node *v1.Node)
}

// ServiceHealth serves health-check node ports for services with
// externalTrafficPolicy Local.
type ServiceHealth interface {
	SyncServices(ports map[types.NamespacedName]uint16) error
	SyncEndpoints(localEndpoints map[types.NamespacedName]int)
}

// PostSyncHook runs after every successful sync with the State and Diff
// that were applied (the conntrack reconciler is one).
type PostSyncHook interface {
	PostSync(ctx context.Context, st *State, diff *Diff)
}

// Config configures a Proxier.
type Config struct {
	NodeName         string
	ServiceProxyName string
	// MinSyncPeriod is a floor between syncs, 0 for none: by default the
	// runner paces syncs by their cost alone (see SyncRunner).
	MinSyncPeriod time.Duration
	// SyncPeriod is --iptables-sync-period (or --ipvs-sync-period): the
	// periodic, verifying sync runs every CheckInterval(SyncPeriod).
	SyncPeriod time.Duration
	// Holdoff is how long the first change after an idle spell waits for
	// companions (see SyncRunnerConfig): 0 means DefaultHoldoff, a
	// negative value none.
	Holdoff time.Duration
	// FullSyncPeriod bounds how long the backend goes without a full
	// rewrite; 0 means DefaultFullSyncInterval.
	FullSyncPeriod time.Duration
	// Family is the primary IP family, used for per-service accounting
	// (health-check node ports, no-local-endpoint metrics) and as the
	// ip_family of network programming latency.
	Family v1.IPFamily
	// Families are the IP families the backend programs; each sync is
	// reported under each of them (kube-proxy runs one proxier per family
	// and reports each). Empty means Family alone.
	Families []v1.IPFamily
	Clock    clock.Clock
}

// Proxier connects informers to a Backend: it feeds the trackers, runs
// the sync loop and reports through metrics and health.
type Proxier struct {
	cfg       Config
	client    kubeapi.Client
	backend   Backend
	metrics   *metrics.Metrics
	health    HealthUpdater
	svcHealth ServiceHealth
	hooks     []PostSyncHook

	snap   *Snapshotter
	runner *SyncRunner
	carry  *Diff // diff of a failed sync, merged into the next one
	locals localPorts

	seenMu sync.Mutex
	seen   time.Time // when the oldest change not yet synced reached a tracker
}

// New returns a Proxier. health and svcHealth may be nil.
func New(client kubeapi.Client, backend Backend, cfg Config, m *metrics.Metrics, health HealthUpdater, svcHealth ServiceHealth, hooks ...PostSyncHook) *Proxier {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = DefaultFullSyncInterval
	}
	if cfg.Family == "" {
		cfg.Family = v1.IPv4Protocol
	}
	if len(cfg.Families) == 0 {
		cfg.Families = []v1.IPFamily{cfg.Family}
	}
	p := &Proxier{cfg: cfg, client: client, backend: backend, metrics: m, health: health, svcHealth: svcHealth, hooks: hooks}
	if m != nil {
		// Series that alerts watch start at 0 (see invalidReasons).
		for _, r := range invalidReasons {
			m.InvalidObjectsTotal.WithLabelValues(r[0], r[1])
		}
		m.SyncErrorsTotal.WithLabelValues(backend.Name())
	}
	p.snap = NewSnapshotter(cfg.NodeName, p.recordInvalid)
	p.snap.SetFamilies(cfg.Families, p.recordSkippedFamily)
	if cfg.Holdoff == 0 {
		cfg.Holdoff = DefaultHoldoff
	}
	p.runner = NewSyncRunner(p.sync, SyncRunnerConfig{
		MinInterval: cfg.MinSyncPeriod, MaxInterval: CheckInterval(cfg.SyncPeriod), FullInterval: cfg.FullSyncPeriod,
		RetryInterval: max(cfg.MinSyncPeriod, time.Second), Holdoff: max(cfg.Holdoff, 0), Clock: cfg.Clock,
	})
	return p
}

// Snapshotter exposes the trackers (for tests and tools).
func (p *Proxier) Snapshotter() *Snapshotter { return p.snap }

func (p *Proxier) recordInvalid(kind, reason string) {
	if p.metrics != nil {
		p.metrics.InvalidObjectsTotal.WithLabelValues(kind, reason).Inc()
	}
}

func (p *Proxier) recordSkippedFamily(kind string, family v1.IPFamily) {
	if p.metrics != nil {
		p.metrics.SkippedFamilyObjectsTotal.WithLabelValues(kind, metrics.Family(family)).Inc()
	}
}

// queued is called after every tracker update that left a change pending;
// endpoints tells an EndpointSlice change, which syncs without the holdoff
// (no companion follows it; it is the companion a new Service waits for).
func (p *Proxier) queued(endpoints bool) {
	p.seenMu.Lock()
	if p.seen.IsZero() {
		p.seen = p.cfg.Clock.Now()
	}
	p.seenMu.Unlock()
	if p.health != nil {
		p.health.QueuedUpdate()
	}
	if p.metrics != nil {
		for _, f := range p.cfg.Families {
			p.metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(metrics.Family(f)).SetToCurrentTime()
		}
	}
	p.updatePendingMetrics()
	if endpoints {
		p.runner.RunNow()
	} else {
		p.runner.Run()
	}
}

func (p *Proxier) updatePendingMetrics() {
	if p.metrics == nil {
		return
	}
	sp, _ := p.snap.Services.Pending()
	ep, _ := p.snap.Endpoints.Pending()
	p.metrics.ServiceChangesPending.Set(float64(sp))
	p.metrics.EndpointChangesPending.Set(float64(ep))
}

// sync is the SyncFunc the runner drives: snapshot, backend sync, report.
// At verbosity 4 it logs where the time went ("Sync trace").
func (p *Proxier) sync(ctx context.Context, req SyncRequest) error {
	start := p.cfg.Clock.Now()
	var tr *synctrace.Trace
	if klog.V(4).Enabled() {
		tr = synctrace.New(p.cfg.Clock.Now)
		ctx = synctrace.With(ctx, tr)
	}
	seen := p.takeSeen()
	st, diff := p.snap.Snapshot()
	diff.Merge(p.carry)
	diff.DropRestored(st)
	p.carry = nil
	diff.Full = diff.Full || req.Full
	diff.Verify = req.Periodic
	p.updatePendingMetrics()
	synctrace.Mark(ctx, "snapshot")
	res, err := p.backend.Sync(ctx, st, diff)
	if err != nil {
		p.carry = diff
		if p.metrics != nil {
			p.metrics.SyncErrorsTotal.WithLabelValues(p.backend.Name()).Inc()
		}
		klog.ErrorS(err, "Sync failed; the next sync will be full", "backend", p.backend.Name())
		return fmt.Errorf("%s sync: %w", p.backend.Name(), err)
	}
	synctrace.Mark(ctx, "backend")
	elapsed := p.cfg.Clock.Since(start)
	full := res.Full || diff.Full
	p.report(st, diff, full, elapsed)
	synctrace.Mark(ctx, "report")
	for _, h := range p.hooks {
		h.PostSync(ctx, st, diff)
	}
	klog.V(2).InfoS("Synced", "backend", p.backend.Name(), "full", full,
		"services", len(st.Services), "changed", len(diff.Changed), "servicesChanged", diff.ServicesChanged,
		"endpointTriggers", len(diff.TriggerTimes), "elapsed", elapsed)
	if tr != nil {
		logTrace(tr, full, len(diff.Changed), seen, start)
	}
	return nil
}

// takeSeen returns when the oldest pending change arrived, and resets it.
func (p *Proxier) takeSeen() time.Time {
	p.seenMu.Lock()
	defer p.seenMu.Unlock()
	seen := p.seen
	p.seen = time.Time{}
	return seen
}

// logTrace writes a sync's phases: how long its oldest change waited
// (holdoff and pacing), then snapshot, the backend's own phases (render,
// commit), the rest of the backend, and the report (health, metrics: the
// last-sync timestamp is set at its end). firstChangeSeen is in Unix
// nanoseconds, to be matched with the time of an API write.
func logTrace(tr *synctrace.Trace, full bool, changed int, seen, start time.Time) {
	kv := []any{"full", full, "changed", changed}
	if !seen.IsZero() {
		kv = append(kv, "firstChangeSeen", seen.UnixNano(), "waitedMs", float64(start.Sub(seen).Microseconds())/1000)
	}
	klog.V(4).InfoS("Sync trace", append(kv, tr.KeysAndValues()...)...)
}
