package app

import (
	"context"
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
	r := &memoryReleaser{}
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
