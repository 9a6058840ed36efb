package proxier

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// hangGuard bounds every wait of these tests so a bug fails instead of
// hanging. It is never used to assert timing.
const hangGuard = 30 * time.Second

// eventClock is a FakeClock that reports, on events, every time the runner
// starts waiting (After) or re-arms its periodic timer (Reset). The tests
// use these events to know exactly where the runner goroutine is before
// they step the clock: no sleeps, no guessing.
type eventClock struct {
	*clocktesting.FakeClock
	events chan string
}

func newEventClock() *eventClock {
	return &eventClock{
		FakeClock: clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		events:    make(chan string, 100),
	}
}

func (c *eventClock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.events <- fmt.Sprintf("after %v", d)
	return ch
}

func (c *eventClock) NewTimer(d time.Duration) clock.Timer {
	return &eventTimer{Timer: c.FakeClock.NewTimer(d), c: c}
}

type eventTimer struct {
	clock.Timer
	c *eventClock
}

func (t *eventTimer) Reset(d time.Duration) bool {
	ok := t.Timer.Reset(d)
	t.c.events <- fmt.Sprintf("reset %v", d)
	return ok
}

// runnerHarness runs a SyncRunner whose SyncFunc hands every call to the
// test and returns what the test answers.
type runnerHarness struct {
	t       *testing.T
	clk     *eventClock
	r       *SyncRunner
	calls   chan SyncRequest // what each sync was asked for
	results chan error
	done    chan struct{}
	cancel  context.CancelFunc
}

const (
	minI   = 2 * time.Second
	maxI   = time.Minute
	fullI  = 3 * maxI
	retryI = 5 * time.Second
)

// startRunner runs a runner with a MinInterval floor and no Holdoff, so
// syncs that cost nothing are paced by the floor alone.
func startRunner(t *testing.T) *runnerHarness {
	return startRunnerWith(t, SyncRunnerConfig{MinInterval: minI})
}

// startRunnerWith runs a runner configured by cfg, with the test's
// MaxInterval, FullInterval, RetryInterval and clock.
func startRunnerWith(t *testing.T, cfg SyncRunnerConfig) *runnerHarness {
	h := &runnerHarness{t: t, clk: newEventClock(), calls: make(chan SyncRequest), results: make(chan error), done: make(chan struct{})}
	fn := func(ctx context.Context, req SyncRequest) error {
		select {
		case h.calls <- req:
		case <-ctx.Done():
			return ctx.Err()
		}
		return <-h.results
	}
	cfg.MaxInterval, cfg.FullInterval, cfg.RetryInterval, cfg.Clock = maxI, fullI, retryI, h.clk
	h.r = NewSyncRunner(fn, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { defer close(h.done); h.r.Loop(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(hangGuard):
			t.Errorf("Loop did not return after cancel")
		}
	})
	return h
}

// expectSync waits for the next sync (one started by a request, not the
// timer), checks its full flag and answers err.
func (h *runnerHarness) expectSync(wantFull bool, err error) {
	h.t.Helper()
	h.expectRequest(SyncRequest{Full: wantFull}, err)
}

// expectFullIgnoringPeriodic waits for a full sync, whatever woke it.
func (h *runnerHarness) expectFullIgnoringPeriodic(err error) {
	h.t.Helper()
	select {
	case got := <-h.calls:
		if !got.Full {
			h.t.Errorf("sync request = %+v, want a full one", got)
		}
		h.results <- err
	case <-time.After(hangGuard):
		h.t.Fatalf("no sync happened")
	}
}

// expectRequest waits for the next sync, checks what it was asked for and
// answers err.
func (h *runnerHarness) expectRequest(want SyncRequest, err error) {
	h.t.Helper()
	select {
	case got := <-h.calls:
		if got != want {
			h.t.Errorf("sync request = %+v, want %+v", got, want)
		}
		h.results <- err
	case <-time.After(hangGuard):
		h.t.Fatalf("no sync happened")
	}
}

// expectNoSync checks that no sync is in progress. Callers only use it when
// the runner is known to be blocked on the clock (after an event).
func (h *runnerHarness) expectNoSync() {
	h.t.Helper()
	select {
	case req := <-h.calls:
		h.t.Fatalf("unexpected sync (%+v)", req)
	default:
	}
}

func (h *runnerHarness) expectEvent(want string) {
	h.t.Helper()
	select {
	case got := <-h.clk.events:
		if got != want {
			h.t.Fatalf("clock event %q, want %q", got, want)
		}
	case <-time.After(hangGuard):
		h.t.Fatalf("no clock event, want %q", want)
	}
}

func (h *runnerHarness) expectNoEvent() {
	h.t.Helper()
	select {
	case got := <-h.clk.events:
		h.t.Fatalf("unexpected clock event %q", got)
	default:
	}
}

func TestSyncRunnerFirstSyncImmediateAndFull(t *testing.T) {
	h := startRunner(t)
	h.expectSync(true, nil)
	h.expectEvent("reset " + maxI.String())
}

func TestSyncRunnerMinInterval(t *testing.T) {
	h := startRunner(t)
	h.expectSync(true, nil)
	h.expectEvent("reset " + maxI.String())

	// A request half a MinInterval later waits for the other half.
	h.clk.Step(minI / 2)
	h.r.Run()
	h.expectEvent("after " + (minI / 2).String())
	h.expectNoSync()
	h.clk.Step(minI/2 - time.Nanosecond)
	h.expectNoSync() // still blocked: its timer has not fired
	h.clk.Step(time.Nanosecond)
	h.expectSync(false, nil)
	h.expectEvent("reset " + maxI.String())

	// A request long after the last sync runs at once.
	h.clk.Step(10 * minI)
	h.r.Run()
	h.expectSync(false, nil)
	h.expectEvent("reset " + maxI.String())
	h.expectNoEvent()
}

func TestSyncRunnerBurstCoalesces(t *testing.T) {
	h := startRunner(t)
	// Requests arriving while the first sync runs collapse into one.
	select {
	case req := <-h.calls:
		if !req.Full {
			t.Errorf("first sync not full")
		}
	case <-time.After(hangGuard):
		t.Fatalf("no first sync")
	}
	for range 10 {
		h.r.Run()
	}
	h.results <- nil
	h.expectEvent("reset " + maxI.String())
	h.expectEvent("after " + minI.String())
	h.clk.Step(minI)
	h.expectSync(false, nil)
	h.expectEvent("reset " + maxI.String())
	if n := len(h.r.requests); n != 0 {
		t.Errorf("%d requests still queued after the coalesced sync", n)
	}
	// The next sync is the periodic one: had another request been left
	// over, a request-driven sync (and an "after" event) would come first.
	h.clk.Step(maxI)
	h.expectRequest(SyncRequest{Periodic: true}, nil)
	h.expectEvent("reset " + maxI.String())
	h.expectNoEvent()
}

// The MaxInterval tick is a verifying, partial sync; a full one comes once
// FullInterval has passed since the last full sync, whatever ran between.
func TestSyncRunnerPeriodicAndFullSync(t *testing.T) {
	h := startRunner(t)
	h.expectSync(true, nil)
	h.expectEvent("reset " + maxI.String())
	for range 2 {
		h.clk.Step(maxI)
		h.expectRequest(SyncRequest{Periodic: true}, nil)
		h.expectEvent("reset " + maxI.String())
	}
	h.clk.Step(maxI) // fullI after the first sync
	h.expectRequest(SyncRequest{Full: true, Periodic: true}, nil)
	h.expectEvent("reset " + maxI.String())
	h.expectNoEvent()
}

// Any sync postpones the periodic one: it comes MaxInterval after the
// last sync of any kind.
func TestSyncRunnerPeriodicCountsFromLastSync(t *testing.T) {
	h := startRunner(t)
	h.expectSync(true, nil)
	h.expectEvent("reset " + maxI.String())
	h.clk.Step(maxI / 2)
	h.r.Run()
	h.expectSync(false, nil)
	h.expectEvent("reset " + maxI.String())
	h.clk.Step(maxI / 2)
	h.expectNoSync()
	h.clk.Step(maxI / 2)
	h.expectRequest(SyncRequest{Periodic: true}, nil)
	h.expectEvent("reset " + maxI.String())
}

func TestSyncRunnerRetryWithBackoff(t *testing.T) {
	h := startRunner(t)
	boom := errors.New("boom")
	h.expectSync(true, boom)
	h.expectEvent("reset " + maxI.String())
	h.expectEvent("after " + retryI.String())
	h.clk.Step(retryI - time.Nanosecond)
	h.expectNoSync()
	h.clk.Step(time.Nanosecond)
	h.expectSync(true, boom) // retries are full
	h.expectEvent("reset " + maxI.String())
	h.expectEvent("after " + (2 * retryI).String())
	h.clk.Step(2*retryI - time.Nanosecond)
	h.expectNoSync()
	h.clk.Step(time.Nanosecond)
	h.expectSync(true, nil)
	h.expectEvent("reset " + maxI.String())

	// Success resets the backoff and the full flag.
	h.clk.Step(minI)
	h.r.Run()
	h.expectSync(false, boom)
	h.expectEvent("reset " + maxI.String())
	h.expectEvent("after " + retryI.String())
	// A request before the retry is due syncs (full, after a failure).
	h.clk.Step(minI)
	h.r.Run()
	h.expectSync(true, nil)
	h.expectEvent("reset " + maxI.String())
}

func TestSyncRunnerBackoffCapped(t *testing.T) {
	h := startRunner(t)
	boom := errors.New("boom")
	h.expectSync(true, boom)
	wait := retryI
	for range 6 {
		h.expectEvent("reset " + maxI.String())
		h.expectEvent("after " + wait.String())
		h.clk.Step(wait)
		// Once the backoff reaches MaxInterval the retry and the periodic
		// timer fire together; either may wake the runner.
		h.expectFullIgnoringPeriodic(boom)
		wait = min(2*wait, maxI)
	}
	if wait != maxI {
		t.Fatalf("test setup: backoff should have reached MaxInterval, at %v", wait)
	}
	h.expectEvent("reset " + maxI.String())
	h.expectEvent("after " + maxI.String())
}

func TestSyncRunnerStopsOnCancel(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *runnerHarness)
	}{
		{"idle", func(h *runnerHarness) {
			h.expectSync(true, nil)
			h.expectEvent("reset " + maxI.String())
		}},
		{"waiting for MinInterval", func(h *runnerHarness) {
			h.expectSync(true, nil)
			h.expectEvent("reset " + maxI.String())
			h.r.Run()
			h.expectEvent("after " + minI.String())
		}},
		{"waiting to retry", func(h *runnerHarness) {
			h.expectSync(true, errors.New("boom"))
			h.expectEvent("reset " + maxI.String())
			h.expectEvent("after " + retryI.String())
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := startRunner(t)
			tc.setup(h)
			h.cancel()
			select {
			case <-h.done:
			case <-time.After(hangGuard):
				t.Fatalf("Loop did not return after cancel")
			}
			h.expectNoSync()
		})
	}
}

func TestSyncRunnerRunNeverBlocks(t *testing.T) {
	r := NewSyncRunner(func(context.Context, SyncRequest) error { return nil }, SyncRunnerConfig{Clock: clocktesting.NewFakeClock(time.Now())})
	for range 100 {
		r.Run() // no Loop running: must not block
	}
	if len(r.requests) != 1 {
		t.Errorf("queued requests = %d, want 1", len(r.requests))
	}
	c := r.cfg
	if c.MaxInterval != time.Hour || c.RetryInterval != time.Second || c.FullInterval != c.MaxInterval ||
		c.BusyShare != DefaultBusyShare || c.BudgetWindow != DefaultBudgetWindow || c.MaxWait != DefaultMaxWait ||
		c.Holdoff != 0 || c.MinInterval != 0 {
		t.Errorf("defaults: %+v", c)
	}
}
