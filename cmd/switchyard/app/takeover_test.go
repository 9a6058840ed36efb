package app

import (
	"context"
	"errors"
	"testing"
	"time"
)

// countingStep fails its first `fail` runs.
type countingStep struct{ runs, fail int }

func (c *countingStep) step(kind string) leftoverStep {
	return leftoverStep{kind: kind, run: func(context.Context) (string, error) {
		c.runs++
		if c.runs <= c.fail {
			return "", errors.New("injected")
		}
		return "something", nil
	}}
}

// inlineTakeover runs each pass inside PostSync, so a test sees its
// effect at once.
func inlineTakeover(steps []leftoverStep) *takeover {
	tk := newTakeover(steps)
	tk.spawn = func(f func()) { f() }
	return tk
}

// A pass runs beside the sync loop: PostSync returns while a step is
// still running, and later syncs start no second pass meanwhile.
func TestTakeoverDoesNotHoldTheSyncLoop(t *testing.T) {
	release, started := make(chan struct{}), make(chan struct{}, 10)
	runs := 0
	slow := leftoverStep{kind: "slow", run: func(context.Context) (string, error) {
		runs++
		started <- struct{}{}
		<-release
		return "", nil
	}}
	tk := newTakeover([]leftoverStep{slow})
	returned := make(chan struct{})
	go func() {
		tk.PostSync(t.Context(), nil, nil)
		tk.PostSync(t.Context(), nil, nil)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("PostSync waited for the step")
	}
	<-started
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk.mu.Lock()
		done := tk.done
		tk.mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pass never finished")
		}
		time.Sleep(time.Millisecond)
	}
	tk.PostSync(t.Context(), nil, nil)
	if runs != 1 || len(started) != 0 {
		t.Fatalf("the step ran %d times, want once", runs)
	}
}

func TestTakeoverRunsOnceAfterTheFirstSync(t *testing.T) {
	a, b := &countingStep{}, &countingStep{}
	tk := inlineTakeover([]leftoverStep{a.step("a"), b.step("b")})
	for range 3 {
		tk.PostSync(t.Context(), nil, nil)
	}
	if a.runs != 1 || b.runs != 1 {
		t.Fatalf("steps ran %d and %d times over three syncs, want once each", a.runs, b.runs)
	}
}

func TestTakeoverRetriesWithBackoffThenGivesUp(t *testing.T) {
	now := time.Unix(0, 0)
	a, ok := &countingStep{fail: 100}, &countingStep{}
	tk := inlineTakeover([]leftoverStep{a.step("a"), ok.step("ok")})
	tk.now = func() time.Time { return now }
	tk.PostSync(t.Context(), nil, nil)
	tk.PostSync(t.Context(), nil, nil) // within the backoff: nothing
	if a.runs != 1 || ok.runs != 1 {
		t.Fatalf("runs %d/%d, want 1/1: a failing step must not stop the others", a.runs, ok.runs)
	}
	for i := 1; i < takeoverAttempts; i++ {
		now = now.Add(takeoverBackoff << (i - 1))
		tk.PostSync(t.Context(), nil, nil)
		if a.runs != i+1 {
			t.Fatalf("attempt %d: %d runs", i+1, a.runs)
		}
	}
	now = now.Add(time.Hour)
	tk.PostSync(t.Context(), nil, nil)
	if a.runs != takeoverAttempts || !tk.done {
		t.Fatalf("%d runs, done %v: want %d and given up", a.runs, tk.done, takeoverAttempts)
	}
}

func TestTakeoverStopsRetryingOnceItSucceeds(t *testing.T) {
	now := time.Unix(0, 0)
	a := &countingStep{fail: 1}
	tk := inlineTakeover([]leftoverStep{a.step("a")})
	tk.now = func() time.Time { return now }
	tk.PostSync(t.Context(), nil, nil)
	now = now.Add(takeoverBackoff)
	tk.PostSync(t.Context(), nil, nil)
	now = now.Add(time.Hour)
	tk.PostSync(t.Context(), nil, nil)
	if a.runs != 2 || !tk.done {
		t.Fatalf("%d runs, done %v: want 2 and done", a.runs, tk.done)
	}
}

// Every mode sweeps iptables with its own chains kept, and cleans every
// other mode's non-iptables state, never its own.
func TestLeftoverStepsPerMode(t *testing.T) {
	for _, c := range []struct {
		mode  Mode
		kinds []string
	}{
		{ModeIPTables, []string{"iptables", "ipvs", "nftables", "userspace"}},
		{ModeNFTables, []string{"iptables", "ipvs", "userspace"}},
		{ModeIPVS, []string{"iptables", "nftables", "userspace"}},
		{ModeUserspace, []string{"iptables", "ipvs", "nftables"}},
	} {
		var kinds []string
		for _, s := range leftoverSteps(&Options{Mode: c.mode}) {
			kinds = append(kinds, s.kind)
		}
		if len(kinds) != len(c.kinds) {
			t.Errorf("%s: steps %v, want %v", c.mode, kinds, c.kinds)
			continue
		}
		for i := range kinds {
			if kinds[i] != c.kinds[i] {
				t.Errorf("%s: steps %v, want %v", c.mode, kinds, c.kinds)
			}
		}
	}
	for _, c := range []struct {
		mode         Mode
		table, chain string
		owned        bool
	}{
		{ModeIPTables, "nat", "KUBE-SVC-X", true},
		{ModeIPTables, "nat", "KUBE-NODE-PORT", false},
		{ModeIPVS, "nat", "KUBE-NODE-PORT", true},
		{ModeIPVS, "nat", "KUBE-SVC-X", false},
		{ModeUserspace, "nat", "KUBE-PORTALS-HOST", true},
		{ModeUserspace, "nat", "KUBE-SERVICES", false},
	} {
		if got := specOf(c.mode).ownsChain(c.table, c.chain); got != c.owned {
			t.Errorf("%s owns %s/%s: %v, want %v", c.mode, c.table, c.chain, got, c.owned)
		}
	}
	if specOf(ModeNFTables).ownsChain != nil {
		t.Error("the nftables mode owns iptables chains")
	}
}

// State still carrying connections is checked again, without counting as
// a failed attempt, until it is free.
func TestTakeoverWaitsForStateInUse(t *testing.T) {
	now := time.Unix(0, 0)
	busy := 12
	runs := 0
	step := leftoverStep{kind: "ipvs", run: func(context.Context) (string, error) {
		runs++
		if runs <= busy {
			return "", errInUse
		}
		return "virtual servers", nil
	}}
	tk := inlineTakeover([]leftoverStep{step})
	tk.now = func() time.Time { return now }
	for range busy {
		tk.PostSync(t.Context(), nil, nil)
		if tk.done {
			t.Fatalf("gave up after %d runs while the state was in use", runs)
		}
		tk.PostSync(t.Context(), nil, nil) // too early: nothing
		now = now.Add(takeoverInUseRetry)
	}
	tk.PostSync(t.Context(), nil, nil)
	if !tk.done || runs != busy+1 {
		t.Fatalf("runs %d, done %v: want %d and done", runs, tk.done, busy+1)
	}
}
