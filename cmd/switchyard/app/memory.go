package app

import (
	"context"
	"runtime/debug"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// memoryReleaser hands memory back to the OS after the syncs that free a
// lot of it, instead of leaving it to Go's background scavenger:
//   - a full sync: at 10k services it allocates ~350 MB transiently
//     (rendered payloads) while the live heap afterwards is ~60 MB;
//   - a sync that leaves the proxier with a fifth fewer service ports than
//     at the last release (a mass deletion).
//
// Both are rare, so the forced GC costs little.
type memoryReleaser struct {
	peak int // service ports at the last release, or more since
}

func (r *memoryReleaser) PostSync(_ context.Context, st *proxier.State, diff *proxier.Diff) {
	n := len(st.Services)
	r.peak = max(r.peak, n)
	if diff.Full || n < r.peak*4/5 {
		debug.FreeOSMemory()
		r.peak = n
	}
}

// fullSyncGC halves the garbage collector's growth target (GOGC, 100 by
// default) while a full sync runs (the first one is full too): that sync's
// transient (the rendered table, then its netlink or iptables-restore
// encoding) is collected twice as often, which lowers the process's peak,
// and the steady state keeps the runtime's default. Measured in nftables
// mode at 10k services × 10 endpoints with GOGC=50 for the whole process
// (hack/bench/nftables, one run each): VmHWM 356 → 288 MB at the same sync
// time (2.64 / 2.66 s); GOGC=25 gave 271 MB for 0.7 s more, so half it is.
// This wrapper together with the held-once render: e2e TestScale, VmHWM
// 325-336 → 224-227 MB (docs/performance.md).
type fullSyncGC struct{ proxier.Backend }

func (b fullSyncGC) Sync(ctx context.Context, st *proxier.State, diff *proxier.Diff) (proxier.SyncResult, error) {
	if diff.Full {
		prev := debug.SetGCPercent(50)
		if prev > 0 {
			debug.SetGCPercent(max(prev/2, 10))
		}
		defer debug.SetGCPercent(prev) // GOGC=off (-1) stays off
	}
	return b.Backend.Sync(ctx, st, diff)
}
