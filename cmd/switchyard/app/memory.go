package app

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// memoryReleaser hands memory back to the OS after the syncs that free a
// lot of it, instead of leaving it to Go's background scavenger:
//   - a full sync: at 10k services it allocates ~350 MB transiently
//     (rendered payloads) while the live heap afterwards is ~60 MB;
//   - a sync that leaves the proxier with a fifth fewer service ports than
//     at the last release (a mass deletion).
//
// Both are rare, so the forced GC costs little. After a release, unless
// the operator set GOGC, it sets the steady state's GC percent from the
// live heap it leaves (steadyPercent).
type memoryReleaser struct {
	peak int // service ports at the last release, or more since
	// operatorSet: GOGC was in the environment; the percent is the
	// operator's.
	operatorSet bool
}

func newMemoryReleaser() *memoryReleaser {
	return &memoryReleaser{operatorSet: gogcSet()}
}

// gogcSet tells whether the operator set GOGC: its percent is then kept.
func gogcSet() bool {
	_, set := os.LookupEnv("GOGC")
	return set
}

func (r *memoryReleaser) PostSync(_ context.Context, st *proxier.State, diff *proxier.Diff) {
	n := len(st.Services)
	r.peak = max(r.peak, n)
	if diff.Full || n < r.peak*4/5 {
		debug.FreeOSMemory()
		r.peak = n
		if !r.operatorSet {
			debug.SetGCPercent(steadyPercent(liveHeap()))
		}
	}
}

// steadyHeadroom bounds the heap the runtime lets grow beside the live
// one between syncs, where the process's peak is reached at large sizes:
// at 44k Services x 2 ports (live heap ~155 MB) GOGC 50 gave a VmHWM of
// 291 MB and GOGC 25 243.9 MB, the first sync no slower (13.59 against
// 13.40 s; e2e TestScale, one run each), a new Service's snapshot slower
// (78 against 13 ms p50: the collector's assists).
const steadyHeadroom = 40 << 20

// steadyPercent is the GC percent that keeps the heap goal within
// steadyHeadroom of a live heap of live bytes, between 25 and
// steadyGCPercent: 50 up to an 80 MB live heap (10k Services x 10
// endpoints and below), 25 from 160 MB.
func steadyPercent(live uint64) int {
	if live == 0 {
		return steadyGCPercent
	}
	return int(min(steadyGCPercent, max(25, steadyHeadroom*100/live)))
}

// liveHeap is the heap the last GC cycle marked live, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// fullSyncGC sets the garbage collector's growth target (GOGC) around
// syncs. When the operator set GOGC, a full sync runs at half of it
// (restored after). Otherwise the process starts at Go's 100 (the
// informers' initial list), and from its first full sync on runs at 50,
// syncs and steady state alike, or lower when the live heap is large
// (steadyPercent, from the live heap before a full sync and after it):
// the live heap is small and changes slowly, so collecting twice as often
// costs little CPU, and the heap the runtime keeps beside the live one is
// halved.
//
// Measured in nftables mode (e2e TestScale, real apiserver, one run each):
//   - full syncs at half: with the held-once render, VmHWM 325-336 → 224-227
//     MB at 10k services × 10 endpoints (in-process, GOGC=50 for the whole
//     process: 356 → 288 MB at the same sync time; GOGC=25: 271 MB, 0.7 s
//     slower, so half it is);
//   - GOGC=50 for the whole process at 5k × 50: RSS 30 s after the changes
//     124.7 → 111.4 MB (anonymous 82.0 → 67.7 MB), first sync 3.17 → 6.74 s,
//     which the full syncs at 25 and the initial list at 50 cost; so the
//     initial list keeps 100 and full syncs 50 (docs/performance.md).
type fullSyncGC struct {
	proxier.Backend
	// operatorSet: GOGC was in the environment; halve it for full syncs.
	operatorSet bool
}

// steadyGCPercent is the GC percent from the first full sync on when the
// operator did not set GOGC.
const steadyGCPercent = 50

func newFullSyncGC(b proxier.Backend) fullSyncGC {
	return fullSyncGC{Backend: b, operatorSet: gogcSet()}
}

func (b fullSyncGC) Sync(ctx context.Context, st *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	switch {
	case diff.Full && !b.operatorSet:
		debug.SetGCPercent(steadyPercent(liveHeap())) // and kept after it
	case diff.Full:
		prev := debug.SetGCPercent(50)
		if prev > 0 {
			debug.SetGCPercent(max(prev/2, 10))
		}
		defer debug.SetGCPercent(prev) // GOGC=off (-1) stays off
	}
	return b.Backend.Sync(ctx, st, diff)
}
