package proxier

import (
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestTrackersGiveBackMemoryAfterMassDeletion creates and deletes 5,000
// Services with slices and checks that the trackers (and the State they
// hand out) do not stay sized for 5,000: Go maps keep the space of deleted
// entries unless they are copied.
func TestTrackersGiveBackMemoryAfterMassDeletion(t *testing.T) {
	const n = 5000
	snap := NewSnapshotter("node-a", nil)
	base := makeService("base")
	snap.Services.Update(nil, base)
	snap.Endpoints.Update(makeSlice("base", "base-1", []sliceEP{ep("10.0.0.1")}), false)
	st, _ := snap.Snapshot()
	before := liveHeap(st)

	svcs, slices := burstObjects(n)
	for i := range n {
		snap.Services.Update(nil, svcs[i])
		snap.Endpoints.Update(slices[i], false)
	}
	st, _ = snap.Snapshot()
	if len(st.Services) != n+1 {
		t.Fatalf("%d service ports after the creations, want %d", len(st.Services), n+1)
	}
	peak := liveHeap(st)
	for i := range n {
		snap.Services.Update(svcs[i], nil)
		snap.Endpoints.Update(slices[i], true)
	}
	st, _ = snap.Snapshot()
	if len(st.Services) != 1 || len(st.Endpoints) != 1 {
		t.Fatalf("after the deletions: %d service ports, %d endpoint lists, want 1 and 1", len(st.Services), len(st.Endpoints))
	}
	svcs, slices = nil, nil
	after := liveHeap(st)
	t.Logf("live heap: before %d KiB, with %d services %d KiB, after deleting them %d KiB", before>>10, n, peak>>10, after>>10)
	// The maps alone of 5,000 service ports take well over 1 MiB; what
	// stays must be far less.
	if after > before+256<<10 {
		t.Errorf("live heap grew from %d to %d KiB after the services were deleted", before>>10, after>>10)
	}
}

func burstObjects(n int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs := make([]*v1.Service, n)
	slices := make([]*discovery.EndpointSlice, n)
	for i := range n {
		name := fmt.Sprintf("burst-%05d", i)
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)
		svcs[i] = makeService(name, withClusterIPs(ip))
		slices[i] = makeSlice(name, name+"-1", []sliceEP{ep(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))})
	}
	return svcs, slices
}

// liveHeap is the live heap after a full GC; keep is held alive until then.
func liveHeap(keep any) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(keep)
	return ms.HeapAlloc
}
