package main

import (
	"fmt"
	"net/netip"
	"time"
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// pick collects one field of every change of every run.
func pick(results []*childResult, newSvc bool, f func(change) time.Duration) []time.Duration {
	var out []time.Duration
	for _, r := range results {
		cs := r.Changes
		if newSvc {
			cs = r.NewServices
		}
		for _, c := range cs {
			out = append(out, f(c))
		}
	}
	return out
}

func perRun(results []*childResult, f func(*childResult) time.Duration) []time.Duration {
	out := make([]time.Duration, len(results))
	for i, r := range results {
		out[i] = f(r)
	}
	return out
}

// report prints one scale's figures: medians over runs for the first
// sync, percentiles over all changes of all runs.
func report(n, eps int, results []*childResult, floors []time.Duration, baseRSS int64) {
	first := median(perRun(results, func(r *childResult) time.Duration { return r.FirstSyncBackend }))
	fl := median(floors)
	fmt.Printf("\n== nftables mode, %d services x %d endpoints, %d runs (each in a fresh network namespace) ==\n", n, eps, len(results))
	fmt.Printf("first full sync (backend Sync)        %8.2f s   runs: %v\n", first.Seconds(), perRun(results, func(r *childResult) time.Duration { return r.FirstSyncBackend }))
	fmt.Printf("first sync from start (list included) %8.2f s\n", median(perRun(results, func(r *childResult) time.Duration { return r.FirstSyncTotal })).Seconds())
	fmt.Printf("floor: nft -f of the same ruleset     %8.2f s   runs: %v   ratio %.2fx\n", fl.Seconds(), floors, first.Seconds()/fl.Seconds())
	fmt.Printf("one element via the nft binary        %8.1f ms  (what a library running nft pays per change)\n", float64(cliCost.Microseconds())/1000)
	fmt.Printf("kernel CPU of the first sync          %8.2f s\n", median(perRun(results, func(r *childResult) time.Duration { return r.FirstSyncSys })).Seconds())
	var rss int64
	for _, r := range results {
		rss = max(rss, r.RSSAfterFirst)
	}
	fmt.Printf("RSS after first sync (max of runs)    %8.1f MiB   same process with a null backend %.1f MiB: nftables mode adds %.1f MiB\n",
		float64(rss)/(1<<20), float64(baseRSS)/(1<<20), float64(rss-baseRSS)/(1<<20))
	for _, kind := range []struct {
		name string
		new  bool
	}{{"one-endpoint change", false}, {"new service with endpoints", true}} {
		lat := pick(results, kind.new, func(c change) time.Duration { return c.Latency })
		if len(lat) == 0 {
			continue
		}
		fmt.Printf("%-27s end to end: p50 %s  p90 %s  p99 %s  (n=%d)\n", kind.name, ms(percentile(lat, 50)), ms(percentile(lat, 90)), ms(percentile(lat, 99)), len(lat))
		fmt.Printf("%-27s backend Sync p50 %s; per change p50 kernel CPU %s, own CPU %s\n", "",
			ms(percentile(pick(results, kind.new, func(c change) time.Duration { return c.Backend }), 50)),
			ms(percentile(pick(results, kind.new, func(c change) time.Duration { return c.Sys }), 50)),
			ms(percentile(pick(results, kind.new, func(c change) time.Duration { return c.User }), 50)))
	}
}
