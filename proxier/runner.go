package proxier

import (
	"context"
	"time"

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

// SyncRunner calls a SyncFunc with bounded frequency: never more often than
// MinInterval, at least every MaxInterval (a periodic, verifying sync),
// fully at least every FullInterval, and again after a failure (full, with
// a backoff from RetryInterval up to MaxInterval). Requests arriving while
// a sync runs or waits collapse into one: the request channel has a single
// slot.
type SyncRunner struct {
	fn            SyncFunc
	minInterval   time.Duration
	maxInterval   time.Duration
	fullInterval  time.Duration
	retryInterval time.Duration
	clock         clock.Clock
	requests      chan struct{}
}

// NewSyncRunner returns a runner; call Loop to start it. A fullInterval of
// 0 makes every periodic sync full.
func NewSyncRunner(fn SyncFunc, minInterval, maxInterval, fullInterval, retryInterval time.Duration, clk clock.Clock) *SyncRunner {
	if retryInterval <= 0 {
		retryInterval = time.Second
	}
	if maxInterval <= 0 {
		maxInterval = time.Hour
	}
	if fullInterval <= 0 {
		fullInterval = maxInterval
	}
	return &SyncRunner{
		fn:            fn,
		minInterval:   minInterval,
		maxInterval:   maxInterval,
		fullInterval:  fullInterval,
		retryInterval: retryInterval,
		clock:         clk,
		requests:      make(chan struct{}, 1),
	}
}

// Run asks for a sync soon. It never blocks.
func (r *SyncRunner) Run() {
	select {
	case r.requests <- struct{}{}:
	default:
	}
}

// Loop runs syncs until ctx is done. The first sync runs at once and is
// full.
func (r *SyncRunner) Loop(ctx context.Context) {
	failed := true // nothing written yet: the first sync is full
	var last, lastFull time.Time
	retry := r.retryInterval
	var retryC <-chan time.Time
	periodic := r.clock.NewTimer(r.maxInterval)
	defer periodic.Stop()
	r.Run()
	for {
		req := SyncRequest{}
		select {
		case <-ctx.Done():
			return
		case <-r.requests:
		case <-periodic.C():
			req.Periodic = true
		case <-retryC:
		}
		if !r.waitMinInterval(ctx, last) {
			return
		}
		select { // coalesce a request that arrived while waiting
		case <-r.requests:
		default:
		}
		last = r.clock.Now()
		req.Full = failed || r.clock.Since(lastFull) >= r.fullInterval
		err := r.fn(ctx, req)
		resetTimer(periodic, r.maxInterval)
		if err == nil {
			if req.Full {
				lastFull = last
			}
			failed, retryC, retry = false, nil, r.retryInterval
			continue
		}
		failed = true
		retryC = r.clock.After(retry)
		retry = min(2*retry, r.maxInterval)
	}
}

// waitMinInterval blocks until MinInterval has passed since last. It
// returns false if ctx ended first.
func (r *SyncRunner) waitMinInterval(ctx context.Context, last time.Time) bool {
	if last.IsZero() {
		return true
	}
	wait := r.minInterval - r.clock.Since(last)
	if wait <= 0 {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-r.clock.After(wait):
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
