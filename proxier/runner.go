package proxier

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// SyncRequest says what kind of sync the runner asks for.
type SyncRequest struct {
	// Full asks for a complete rewrite: the first sync, after a failure,
	// and at least every FullInterval.
	Full bool
	// Periodic is set when the sync was started by the MaxInterval timer
	// rather than by a change: backends use it to verify, cheaply, that
	// the kernel still holds what they wrote (someone may have flushed a
	// chain) without rewriting everything.
	Periodic bool
}

// SyncFunc performs one sync.
type SyncFunc func(ctx context.Context, req SyncRequest) error

// DefaultFullSyncInterval is how often a full rewrite happens when nothing
// fails: kube-proxy's FullSyncPeriod. At 10k services a full iptables
// rewrite costs seconds, so the MaxInterval tick (30 s) is partial and
// verifying instead.
const DefaultFullSyncInterval = time.Hour

// CheckInterval is how often a proxier with sync period syncPeriod runs
// its periodic, verifying sync (SyncRequest.Periodic), and how old a
// backend's last check of the kernel may be before a partial sync checks
// again while changes keep the periodic sync away. Two thirds of the
// period, so that a flushed or deleted chain is found and rewritten
// within one period (--iptables-sync-period promises that): found at most
// 20 s after the damage with the default 30 s, repaired in 0.6-3.2 s at
// 10k services. Checking costs ~1 ms while nobody else writes rules and
// under 0.8 s of CPU when someone did (backends/iptables/verify.go),
// under 4 % of a core at 10k services.
func CheckInterval(syncPeriod time.Duration) time.Duration {
	return syncPeriod * 2 / 3
}

// Defaults of the adaptive pacing (see SyncRunnerConfig).
const (
	// DefaultHoldoff lets a Service and the EndpointSlice the control
	// plane writes right after it go in one sync: on a local apiserver the
	// second event follows the first by a few milliseconds.
	DefaultHoldoff = 20 * time.Millisecond
	// DefaultBusyShare keeps syncing to 42 % of one core's time, so that
	// the daemon as a whole stays within half a core under churn: besides
	// the syncs it decodes watch events, builds snapshots, collects
	// garbage (3-4 % of a core during a burst at 10k services), and a
	// burst's last sync overruns the share by up to (1-share) of its
	// duration. At 10k services on iptables-nft, where every commit costs
	// the kernel ~0.4 s whatever its size, this also bounds how long an
	// update waits: a sync, the pause after it (1.4 times the sync) and
	// the sync that carries it, under 2 s.
	DefaultBusyShare = 0.42
	// DefaultBudgetWindow sets the credit a quiet period saves: BusyShare
	// of it (105 ms), a few back-to-back syncs at 1k services (~30-50 ms
	// each) but a small part of a 10 s burst at 10k, which the credit
	// would otherwise push over half a core (1 s in hand made 59 % of
	// 11 s).
	DefaultBudgetWindow = 250 * time.Millisecond
	// DefaultMaxWait is the longest wait one sync earns: after the first
	// full sync at 10k services (15-20 s) changes wait at most this long,
	// while a partial sync at 10k on legacy iptables (~2.2 s) still earns
	// its full pause.
	DefaultMaxWait = 4 * time.Second
)

// SyncRunnerConfig configures a SyncRunner. Zero durations and shares
// take the defaults named on each field; Holdoff and MinInterval are used
// as given (0 means none).
type SyncRunnerConfig struct {
	// MinInterval is a floor between the starts of two syncs, for operators
	// who set --iptables-min-sync-period or --ipvs-min-sync-period.
	MinInterval time.Duration
	// MaxInterval is the periodic, verifying sync (default 1h).
	MaxInterval time.Duration
	// FullInterval bounds the time between full syncs (default
	// MaxInterval).
	FullInterval time.Duration
	// RetryInterval is the first backoff after a failure (default 1s),
	// doubling up to MaxInterval.
	RetryInterval time.Duration
	// Holdoff is how long the first change after an idle spell waits for
	// companions before its sync starts.
	Holdoff time.Duration
	// BusyShare is the share of wall time syncs may take, measured over
	// BudgetWindow (default DefaultBusyShare; 1 means no pacing).
	BusyShare float64
	// BudgetWindow: see DefaultBudgetWindow.
	BudgetWindow time.Duration
	// MaxWait: see DefaultMaxWait.
	MaxWait time.Duration
	Clock   clock.Clock
}

func (c *SyncRunnerConfig) defaults() {
	if c.RetryInterval <= 0 {
		c.RetryInterval = time.Second
	}
	if c.MaxInterval <= 0 {
		c.MaxInterval = time.Hour
	}
	if c.FullInterval <= 0 {
		c.FullInterval = c.MaxInterval
	}
	if c.BusyShare <= 0 || c.BusyShare > 1 {
		c.BusyShare = DefaultBusyShare
	}
	if c.BudgetWindow <= 0 {
		c.BudgetWindow = DefaultBudgetWindow
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
}

// SyncRunner calls a SyncFunc with adaptive frequency. A change after an
// idle spell syncs after Holdoff; changes arriving while a sync runs
// collapse into the next one (the request channel has a single slot),
// which starts as soon as the sync budget allows: syncs may take
// BusyShare of wall time, so cheap syncs follow each other at once and
// expensive ones are spaced out. MinInterval, when set, is a floor on
// top. A periodic, verifying sync runs at least every MaxInterval, a full
// one at least every FullInterval, and a failed sync is retried, full,
// with a backoff from RetryInterval up to MaxInterval.
type SyncRunner struct {
	fn       SyncFunc
	cfg      SyncRunnerConfig
	clock    clock.Clock
	budget   syncBudget
	requests chan struct{}
	// urgent carries RunNow's requests: no holdoff for them.
	urgent chan struct{}
}

// NewSyncRunner returns a runner; call Loop to start it.
func NewSyncRunner(fn SyncFunc, cfg SyncRunnerConfig) *SyncRunner {
	cfg.defaults()
	return &SyncRunner{
		fn:       fn,
		cfg:      cfg,
		clock:    cfg.Clock,
		budget:   newSyncBudget(cfg.BusyShare, cfg.BudgetWindow, cfg.MaxWait),
		requests: make(chan struct{}, 1),
		urgent:   make(chan struct{}, 1),
	}
}

// Run asks for a sync soon. It never blocks.
func (r *SyncRunner) Run() {
	select {
	case r.requests <- struct{}{}:
	default:
	}
}

// RunNow is Run for a change no companion follows: an EndpointSlice (the
// holdoff exists so that a new Service's slice, written right after it,
// joins its sync). It syncs without the holdoff, and ends one under way;
// the pacing by cost still applies. It never blocks.
func (r *SyncRunner) RunNow() {
	select {
	case r.urgent <- struct{}{}:
	default:
	}
	r.Run()
}

// takeUrgent consumes a pending RunNow.
func (r *SyncRunner) takeUrgent() bool {
	select {
	case <-r.urgent:
		return true
	default:
		return false
	}
}

// loopState is what Loop remembers between syncs.
type loopState struct {
	failed    bool // the next sync must be full
	lastStart time.Time
	lastFull  time.Time
	retry     time.Duration
	retryC    <-chan time.Time
	// pending is set when a request arrived while the last sync ran: it
	// syncs without Holdoff, having waited already.
	pending bool
}

// Loop runs syncs until ctx is done. The first sync runs at once and is
// full.
func (r *SyncRunner) Loop(ctx context.Context) {
	s := loopState{failed: true, retry: r.cfg.RetryInterval, pending: true}
	periodic := r.clock.NewTimer(r.cfg.MaxInterval)
	defer periodic.Stop()
	r.Run()
	for {
		req, byChange, ok := r.wake(ctx, periodic, s.retryC)
		if !ok {
			return
		}
		holdoff := byChange && !s.pending && !r.takeUrgent()
		if !r.wait(ctx, &s, holdoff) {
			return
		}
		select { // coalesce a request that arrived while waiting
		case <-r.requests:
		default:
		}
		r.takeUrgent()
		err := r.syncOnce(ctx, &s, req)
		resetTimer(periodic, r.cfg.MaxInterval)
		s.pending = len(r.requests) > 0
		r.afterSync(&s, err)
	}
}

// wake blocks until a change, the periodic timer or a retry is due. It
// reports whether a change woke it, and false once ctx ends.
func (r *SyncRunner) wake(ctx context.Context, periodic clock.Timer, retryC <-chan time.Time) (SyncRequest, bool, bool) {
	select {
	case <-ctx.Done():
		return SyncRequest{}, false, false
	case <-r.requests:
		return SyncRequest{}, true, true
	case <-periodic.C():
		return SyncRequest{Periodic: true}, false, true
	case <-retryC:
		return SyncRequest{}, false, true
	}
}

// syncOnce runs one sync and charges its duration to the budget.
func (r *SyncRunner) syncOnce(ctx context.Context, s *loopState, req SyncRequest) error {
	start := r.clock.Now()
	s.lastStart = start
	req.Full = s.failed || r.clock.Since(s.lastFull) >= r.cfg.FullInterval
	err := r.fn(ctx, req)
	r.budget.spend(start, r.clock.Now())
	if err == nil && req.Full {
		s.lastFull = start
	}
	return err
}

// afterSync arms the retry after a failure and resets it after a success.
func (r *SyncRunner) afterSync(s *loopState, err error) {
	if err == nil {
		s.failed, s.retryC, s.retry = false, nil, r.cfg.RetryInterval
		return
	}
	s.failed = true
	s.retryC = r.clock.After(s.retry)
	s.retry = min(2*s.retry, r.cfg.MaxInterval)
}

// startAt is the earliest time the next sync may start: when the budget
// allows it, not before MinInterval after the last start, and, for the
// first change after an idle spell, Holdoff from now.
func (r *SyncRunner) startAt(s *loopState) time.Time {
	at := r.budget.readyAt(r.clock.Now())
	if !s.lastStart.IsZero() {
		at = later(at, s.lastStart.Add(r.cfg.MinInterval))
	}
	return at
}

// wait blocks until the next sync may start: the pacing, and with
// holdoff the Holdoff where it ends later, a part a RunNow cuts short. It
// returns false if ctx ended first.
func (r *SyncRunner) wait(ctx context.Context, s *loopState, holdoff bool) bool {
	at := r.startAt(s)
	if hold := r.clock.Now().Add(r.cfg.Holdoff); holdoff && hold.After(at) {
		if !r.waitUntil(ctx, hold, r.urgent) {
			return false
		}
	}
	return r.waitUntil(ctx, at, nil)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// waitUntil blocks until the clock reaches t or interrupt delivers (a
// nil interrupt never does). It returns false if ctx ended first.
func (r *SyncRunner) waitUntil(ctx context.Context, t time.Time, interrupt <-chan struct{}) bool {
	wait := t.Sub(r.clock.Now())
	if wait <= 0 {
		return true
	}
	klog.V(4).InfoS("Sync paced", "wait", wait)
	select {
	case <-ctx.Done():
		return false
	case <-r.clock.After(wait):
		return true
	case <-interrupt:
		return true
	}
}

func resetTimer(t clock.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.C():
		default:
		}
	}
	t.Reset(d)
}
