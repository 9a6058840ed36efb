//go:build e2e

package e2e

import (
	"testing"
	"time"
)

func TestParseTracesAndBreakdown(t *testing.T) {
	start := time.Unix(1000, 0)
	seen := start.Add(7 * time.Millisecond)
	log := `I1128 06:24:16.120710   18933 proxier.go:190] "Synced" backend="nftables"
I1128 06:24:16.120710   18933 proxier.go:200] "Sync trace" full=false changed=0 snapshotMs=0.2
I1128 06:24:16.120710   18933 proxier.go:200] "Sync trace" full=false changed=1 firstChangeSeen=` +
		"1000007000000" + ` waitedMs=0.5 snapshotMs=0.25 renderMs=1.5 commitMs=3 backendMs=0.1 reportMs=0.75
`
	traces := parseTraces(log)
	if len(traces) != 1 || !traces[0].seen.Equal(seen) || traces[0].phases["commit"] != 3*time.Millisecond {
		t.Fatalf("parsed %+v", traces)
	}
	c := timedChange{start: start, written: start.Add(5 * time.Millisecond), latency: 20 * time.Millisecond}
	bd := breakdown([]timedChange{c}, traces)
	want := map[string]time.Duration{"api": 5 * time.Millisecond, "tracker": 7 * time.Millisecond,
		"waited": 500 * time.Microsecond, "render": 1500 * time.Microsecond, "report": 750 * time.Microsecond}
	for p, w := range want {
		if len(bd[p]) != 1 || bd[p][0] != w {
			t.Errorf("%s: %v, want %v", p, bd[p], w)
		}
	}
	late := timedChange{start: start.Add(10 * time.Millisecond), latency: time.Millisecond}
	if bd := breakdown([]timedChange{late}, traces); len(bd["api"]) != 0 {
		t.Errorf("a change written after the trace's change was matched: %v", bd)
	}
}

func TestTraceEnds(t *testing.T) {
	log := `I1128 06:43:50.994096   24425 proxier.go:220] "Sync trace" full=false changed=3 firstChangeSeen=1 waitedMs=0.5
I1128 06:43:51.000001   24425 proxier.go:220] "Sync trace" full=false changed=0 snapshotMs=0.2
I1128 06:43:52.500000   24425 proxier.go:192] "Synced" backend="nftables" changed=2
I1128 06:43:52.500100   24425 proxier.go:220] "Sync trace" full=false changed=2 firstChangeSeen=2 waitedMs=0.5
`
	day := time.Date(2026, 11, 28, 0, 0, 0, 0, time.Local)
	ends, changed := traceEnds(log, day)
	if len(ends) != 2 || changed[0] != 3 || changed[1] != 2 {
		t.Fatalf("ends %v changed %v", ends, changed)
	}
	if want := time.Date(2026, 11, 28, 6, 43, 50, 994096000, time.Local); !ends[0].Equal(want) {
		t.Errorf("end %v, want %v", ends[0], want)
	}
}
