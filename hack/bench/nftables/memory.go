package main

import (
	"fmt"
	"runtime/metrics"
	"sync/atomic"
	"time"
)

// memoryRuns measures one backend's memory at one scale: each run a child
// in a fresh namespace (-memory). The child's figures include the fake
// API server's objects and the proxier, as the daemon's include the
// informers; compare backends, or binaries, with the same flags.
func memoryRuns(backend string, n, eps, runs int, args []string) error {
	fmt.Printf("\n== memory, %s, %d services x %d endpoints, %d runs (each in a fresh network namespace) ==\n", backend, n, eps, runs)
	fmt.Printf("%-4s %12s %12s %10s %10s %18s %18s %10s\n", "run", "first sync", "from start", "VmHWM", "peak heap", "RSS after (anon)", "settled (anon)", "end VmHWM")
	for r := 0; r < runs; r++ {
		res, err := inNetns(func(ns string) (*childResult, error) {
			return runChildIn(ns, append(args, "-backend="+backend)...)
		})
		if err != nil {
			return fmt.Errorf("%s, %d services, run %d: %w", backend, n, r+1, err)
		}
		fmt.Printf("%-4d %10.2f s %10.2f s %7.1f MB %7.1f MB %7.1f (%5.1f) MB %7.1f (%5.1f) MB %7.1f MB\n", r+1,
			res.FirstSyncBackend.Seconds(), res.FirstSyncTotal.Seconds(), mb(res.PeakRSS), mb(res.PeakHeap),
			mb(res.RSSAfterFirst), mb(res.AnonAfterFirst), mb(res.SettledRSS), mb(res.SettledAnon), mb(res.FinalPeakRSS))
	}
	return nil
}

// mb is bytes in MB (10^6), as TestScale prints VmHWM.
func mb(b int64) float64 { return float64(b) / 1e6 }

// sampleHeapPeak samples the heap's objects every 5 ms until the
// returned function is called, which returns the most seen.
func sampleHeapPeak() func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak.Store(max(peak.Load(), int64(s[0].Value.Uint64())))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return peak.Load()
	}
}
