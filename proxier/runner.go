package proxier

import (
	"context"
	"time"

	"k8s.io/utils/clock"
)

// SyncFunc performs one sync. full asks for a complete rewrite (first
// sync, periodic resync, or after a failure).
type SyncFunc func(ctx context.Context, full bool) error

// SyncRunner calls a SyncFunc with bounded frequency: never more often than
// MinInterval, at least every MaxInterval (a full resync), and again after
// a failure (full, with a backoff from RetryInterval up to MaxInterval).
// Requests arriving while a sync runs or waits collapse into one: the
// request channel has a single slot.
type SyncRunner struct {
	fn            SyncFunc
	minInterval   time.Duration
	maxInterval   time.Duration
	retryInterval time.Duration
	clock         clock.Clock
	requests      chan struct{}
}

// NewSyncRunner returns a runner; call Loop to start it.
func NewSyncRunner(fn SyncFunc, minInterval, maxInterval, retryInterval time.Duration, clk clock.Clock) *SyncRunner {
	if retryInterval <= 0 {
		retryInterval = time.Second
	}
	if maxInterval <= 0 {
		maxInterval = time.Hour
	}
	return &SyncRunner{
		fn:            fn,
		minInterval:   minInterval,
		maxInterval:   maxInterval,
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
	full := true
	var last time.Time
	retry := r.retryInterval
	var retryC <-chan time.Time
	periodic := r.clock.NewTimer(r.maxInterval)
	defer periodic.Stop()
	r.Run()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.requests:
		case <-periodic.C():
			full = true
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
		err := r.fn(ctx, full)
		if full {
			// The periodic full resync counts from the last full sync,
			// so a steady stream of partial syncs cannot starve it.
			resetTimer(periodic, r.maxInterval)
		}
		if err == nil {
			full, retryC, retry = false, nil, r.retryInterval
			continue
		}
		full = true
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
