package app

import (
	"context"
	"runtime/debug"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/proxier"
)

func stateWith(n int) *proxier.State {
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{}}
	for i := range n {
		name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: string(rune('a'+i%26)) + string(rune('a'+i/26))}}
		st.Services[name] = &proxier.ServicePort{Name: name}
	}
	return st
}

// The releaser tracks the peak so a later mass deletion is noticed, and
// restarts from the level it released at.
func TestMemoryReleaserTracksPeak(t *testing.T) {
	r := &memoryReleaser{operatorSet: true}
	steps := []struct {
		services int
		full     bool
		wantPeak int
	}{
		{100, true, 100},  // full: released, peak = current
		{500, false, 500}, // growth raises the peak
		{450, false, 500}, // -10 %: kept
		{390, false, 390}, // -22 % from the peak: released
		{400, false, 400},
	}
	for i, s := range steps {
		r.PostSync(context.Background(), stateWith(s.services), &proxier.Diff{Full: s.full})
		if r.peak != s.wantPeak {
			t.Errorf("step %d (%d services): peak %d, want %d", i, s.services, r.peak, s.wantPeak)
		}
	}
}

// gcProbe records the GC percent in force while it syncs.
type gcProbe struct{ seen []int }

func (*gcProbe) Name() string                  { return "probe" }
func (*gcProbe) Cleanup(context.Context) error { return nil }
func (p *gcProbe) Sync(context.Context, *proxier.State, *proxier.Diff) (proxier.SyncResult, error) {
	cur := debug.SetGCPercent(100)
	debug.SetGCPercent(cur)
	p.seen = append(p.seen, cur)
	return proxier.SyncResult{}, nil
}

// The GC percent in force during syncs and after them: with GOGC set by
// the operator (80 here) a full sync runs at half of it and the
// operator's is restored; without it the process runs at Go's 100 until
// its first full sync, then at 50 for every sync and in between.
func TestFullSyncGC(t *testing.T) {
	for _, tc := range []struct {
		name         string
		operatorSet  bool
		start, after int
		fulls        []bool
		during       []int
	}{
		{"GOGC set", true, 80, 80, []bool{true, false, true}, []int{40, 80, 40}},
		{"GOGC unset", false, 100, 50, []bool{false, true, false}, []int{100, 50, 50}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev := debug.SetGCPercent(tc.start)
			defer debug.SetGCPercent(prev)
			p := &gcProbe{}
			b := fullSyncGC{Backend: p, operatorSet: tc.operatorSet}
			for _, full := range tc.fulls {
				if _, err := b.Sync(context.Background(), stateWith(1), &proxier.Diff{Full: full}); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(p.seen, tc.during) {
				t.Errorf("GC percent during syncs (full: %v) = %v, want %v", tc.fulls, p.seen, tc.during)
			}
			if cur := debug.SetGCPercent(tc.start); cur != tc.after {
				t.Errorf("GC percent after the syncs = %d, want %d", cur, tc.after)
			}
		})
	}
}

// The steady state's GC percent follows the live heap: 50 up to 80 MB,
// then what keeps 40 MB of headroom, never under 25.
func TestSteadyPercent(t *testing.T) {
	for live, want := range map[uint64]int{0: 50, 20 << 20: 50, 80 << 20: 50, 100 << 20: 40, 160 << 20: 25, 1 << 30: 25} {
		if got := steadyPercent(live); got != want {
			t.Errorf("live heap %d MiB: GC percent %d, want %d", live>>20, got, want)
		}
	}
}

// A release without GOGC from the operator sets the steady percent; with
// it, leaves the operator's.
func TestMemoryReleaserSetsSteadyPercent(t *testing.T) {
	prev := debug.SetGCPercent(80)
	defer debug.SetGCPercent(prev)
	(&memoryReleaser{operatorSet: true}).PostSync(context.Background(), stateWith(1), &proxier.Diff{Full: true})
	if cur := debug.SetGCPercent(80); cur != 80 {
		t.Errorf("with GOGC set: GC percent %d after a release, want the operator's 80", cur)
	}
	(&memoryReleaser{}).PostSync(context.Background(), stateWith(1), &proxier.Diff{Full: true})
	if cur, want := debug.SetGCPercent(80), steadyPercent(liveHeap()); cur != want || cur < 25 || cur > 50 {
		t.Errorf("without GOGC: GC percent %d after a release, want %d (25..50)", cur, want)
	}
}
