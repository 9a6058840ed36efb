package proxier

import (
	"testing"
	"time"
)

// The adaptive pacing, on the fake clock: a sync "costs" what the test
// steps the clock by while the SyncFunc runs.

const holdoff = 10 * time.Millisecond

// syncCosting waits for the next sync, checks it, lets cost pass on the
// clock, asks for ten more syncs while it runs when more is set (a burst
// of changes), and answers success.
func (h *runnerHarness) syncCosting(want SyncRequest, cost time.Duration, more bool) {
	h.t.Helper()
	select {
	case got := <-h.calls:
		if got != want {
			h.t.Errorf("sync request = %+v, want %+v", got, want)
		}
		h.clk.Step(cost)
		for i := 0; more && i < 10; i++ {
			h.r.Run()
		}
		h.results <- nil
	case <-time.After(hangGuard):
		h.t.Fatalf("no sync happened")
	}
	h.expectEvent("reset " + maxI.String())
}

// A change after a quiet spell syncs after Holdoff alone; a companion
// change within it (the EndpointSlice after its Service) joins that sync.
func TestSyncRunnerQuietChangeSyncsAfterHoldoff(t *testing.T) {
	h := startRunnerWith(t, SyncRunnerConfig{Holdoff: holdoff})
	h.syncCosting(SyncRequest{Full: true}, 0, false) // the first sync: at once
	h.clk.Step(10 * time.Second)
	h.r.Run()
	h.expectEvent("after " + holdoff.String())
	h.r.Run() // the companion
	h.clk.Step(holdoff - time.Nanosecond)
	h.expectNoSync()
	h.clk.Step(time.Nanosecond)
	h.syncCosting(SyncRequest{}, 50*time.Millisecond, false)
	h.expectNoEvent() // one sync for both, nothing queued
	h.expectNoSync()
}

// An EndpointSlice change (RunNow) after a quiet spell syncs at once; one
// arriving during a Service's holdoff ends it, and both go in one sync.
func TestSyncRunnerRunNowSkipsAndEndsHoldoff(t *testing.T) {
	h := startRunnerWith(t, SyncRunnerConfig{Holdoff: holdoff})
	h.syncCosting(SyncRequest{Full: true}, 0, false)
	h.clk.Step(10 * time.Second)
	h.r.RunNow()
	h.syncCosting(SyncRequest{}, 0, false) // no holdoff: the clock did not move
	h.clk.Step(10 * time.Second)
	h.r.Run() // a Service
	h.expectEvent("after " + holdoff.String())
	h.expectNoSync()
	h.r.RunNow() // its slice, 1 ms later on a real apiserver
	h.syncCosting(SyncRequest{}, 0, false)
	h.expectNoEvent()
	h.expectNoSync()
}

// Changes arriving while a sync runs are applied by the next sync, which
// starts as soon as the first ends when syncs are cheap: no Holdoff and
// no pacing wait.
func TestSyncRunnerBurstCoalescesIntoNextSync(t *testing.T) {
	h := startRunnerWith(t, SyncRunnerConfig{Holdoff: holdoff})
	h.syncCosting(SyncRequest{Full: true}, 0, false)
	h.clk.Step(time.Minute / 2)
	h.r.Run()
	h.expectEvent("after " + holdoff.String())
	h.clk.Step(holdoff)
	h.syncCosting(SyncRequest{}, 20*time.Millisecond, true)
	h.syncCosting(SyncRequest{}, 20*time.Millisecond, false)
	h.expectNoEvent() // the burst took exactly two syncs, no waits
	h.expectNoSync()
}

// Expensive syncs under steady churn are spaced so they take BusyShare of
// the time: at 50 % a 2 s sync is followed by a 2 s pause. The credit a
// quiet start saved (share x window = 1 s) is spent first: a 2 s sync
// at 50 % costs 1 s of it, so the second sync follows at once.
func TestSyncRunnerExpensiveSyncsSpacedOut(t *testing.T) {
	h := startRunnerWith(t, SyncRunnerConfig{BusyShare: 0.5, BudgetWindow: 2 * time.Second})
	cost := 2 * time.Second
	h.syncCosting(SyncRequest{Full: true}, cost, true) // credit 1 s -> 0
	h.syncCosting(SyncRequest{}, cost, true)           // 0 -> -1 s
	for range 4 {
		h.expectEvent("after " + cost.String())
		h.clk.Step(cost - time.Nanosecond)
		h.expectNoSync()
		h.clk.Step(time.Nanosecond)
		h.syncCosting(SyncRequest{}, cost, true)
	}
	h.expectEvent("after " + cost.String())
}

// One very long sync (a first full sync at 10k services) holds the
// changes that follow it back by at most MaxWait.
func TestSyncRunnerLongSyncDebtCapped(t *testing.T) {
	maxWait := 3 * time.Second
	h := startRunnerWith(t, SyncRunnerConfig{BusyShare: 0.5, BudgetWindow: time.Second, MaxWait: maxWait})
	h.syncCosting(SyncRequest{Full: true}, 15*time.Second, true)
	h.expectEvent("after " + maxWait.String())
	h.clk.Step(maxWait)
	h.syncCosting(SyncRequest{}, 0, false)
	h.expectNoEvent()
}

// An explicit minimum sync period is a floor under the adaptive pacing:
// cheap syncs never come closer than it, and a change after a long quiet
// spell still only waits Holdoff.
func TestSyncRunnerExplicitMinIntervalIsAFloor(t *testing.T) {
	h := startRunnerWith(t, SyncRunnerConfig{MinInterval: minI, Holdoff: holdoff})
	h.syncCosting(SyncRequest{Full: true}, 0, true)
	h.expectEvent("after " + minI.String())
	h.clk.Step(minI - time.Nanosecond)
	h.expectNoSync()
	h.clk.Step(time.Nanosecond)
	h.syncCosting(SyncRequest{}, 0, false)

	h.clk.Step(10 * minI)
	h.r.Run()
	h.expectEvent("after " + holdoff.String())
	h.clk.Step(holdoff)
	h.syncCosting(SyncRequest{}, 0, false)
	h.expectNoEvent()
}

// Under a burst of back-to-back changes, the default budget keeps sync
// time within BudgetWindow's credit plus BusyShare of the span, whether a
// sync costs 30 ms (1k services), 440 ms (10k, nft) or 2.2 s (10k,
// legacy, each sync earning its whole pause under MaxWait).
func TestSyncBudgetBurstShare(t *testing.T) {
	for _, cost := range []time.Duration{30 * time.Millisecond, 440 * time.Millisecond, 2200 * time.Millisecond} {
		b := newSyncBudget(DefaultBusyShare, DefaultBudgetWindow, DefaultMaxWait)
		start := time.Unix(1000, 0)
		now, busy := start, time.Duration(0)
		b.refill(now)
		for now.Sub(start) < time.Minute {
			now = b.readyAt(now)
			b.spend(now, now.Add(cost))
			now, busy = now.Add(cost), busy+cost
		}
		span := now.Sub(start)
		limit := time.Duration(DefaultBusyShare*float64(DefaultBudgetWindow)) + time.Duration(DefaultBusyShare*float64(span)) +
			time.Duration((1-DefaultBusyShare)*float64(cost)) // the last sync's overrun
		if busy > limit {
			t.Errorf("cost %v: %v of sync in %v, more than %v", cost, busy, span, limit)
		}
		if share := float64(busy) / float64(span); share < DefaultBusyShare-0.02 {
			t.Errorf("cost %v: syncs took %.2f of the time, want about %.2f", cost, share, DefaultBusyShare)
		}
	}
}
