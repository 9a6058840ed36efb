//go:build e2e

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// syncTrace is one "Sync trace" line of the daemon (-v=4): when the
// oldest change it synced reached a tracker, and its phases.
type syncTrace struct {
	seen   time.Time
	phases map[string]time.Duration
}

var traceKV = regexp.MustCompile(`(\w+)=([-0-9.e+]+)`)

// parseTraces reads the trace lines of a daemon log; lines without a
// change (periodic syncs) are skipped.
func parseTraces(log string) []syncTrace {
	var out []syncTrace
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"Sync trace"`) {
			continue
		}
		tr := syncTrace{phases: map[string]time.Duration{}}
		for _, m := range traceKV.FindAllStringSubmatch(line, -1) {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				continue
			}
			switch {
			case m[1] == "firstChangeSeen":
				tr.seen = time.Unix(0, int64(v))
			case strings.HasSuffix(m[1], "Ms"):
				tr.phases[strings.TrimSuffix(m[1], "Ms")] = time.Duration(v * float64(time.Millisecond))
			}
		}
		if !tr.seen.IsZero() {
			out = append(out, tr)
		}
	}
	return out
}

// tracePhases are the columns of the breakdown, in the order time passes.
var tracePhases = []string{"api", "tracker", "waited", "snapshot", "render", "commit", "backend", "report"}

// breakdown matches each change with the first sync whose oldest change
// arrived after the write began, and gives per phase every change's span:
// api (the write's round trip), tracker (write start to the informer
// handing the change to a tracker: API, watch, decode, transform), then
// the sync's own phases.
func breakdown(changes []timedChange, traces []syncTrace) map[string][]time.Duration {
	out := map[string][]time.Duration{}
	for _, c := range changes {
		i := slices.IndexFunc(traces, func(tr syncTrace) bool {
			return !tr.seen.Before(c.start) && tr.seen.Before(c.start.Add(c.latency))
		})
		if i < 0 {
			continue
		}
		tr := traces[i]
		out["api"] = append(out["api"], c.written.Sub(c.start))
		out["tracker"] = append(out["tracker"], tr.seen.Sub(c.start))
		for _, p := range tracePhases[2:] {
			out[p] = append(out[p], tr.phases[p])
		}
	}
	return out
}

// logFirstTrace logs where a daemon's first sync spent its time, from its
// first full sync's trace line (-v=4; nothing without): the time from the
// process start to the sync (the start, the informers' list), then the
// sync's phases. klog writes its buffer every 5 s, so the line is waited
// for up to 10 s.
func logFirstTrace(t *testing.T, what string, d *framework.Daemon, took time.Duration) {
	var line string
	deadline := time.Now().Add(10 * time.Second)
	for line == "" && time.Now().Before(deadline) {
		log, err := d.LogFrom(0)
		if err != nil {
			return
		}
		line = firstFullTrace(log)
		if line == "" {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if line == "" {
		t.Logf("%s: no full sync's trace line in the daemon's log after 10 s", what)
		return
	}
	phases, sum := map[string]time.Duration{}, time.Duration(0)
	for _, m := range traceKV.FindAllStringSubmatch(line, -1) {
		if v, err := strconv.ParseFloat(m[2], 64); err == nil && strings.HasSuffix(m[1], "Ms") && m[1] != "waitedMs" {
			phases[strings.TrimSuffix(m[1], "Ms")] = time.Duration(v * float64(time.Millisecond))
			sum += phases[strings.TrimSuffix(m[1], "Ms")]
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s before the sync", what, secs(took-sum))
	for _, p := range tracePhases[3:] {
		fmt.Fprintf(&b, ", %s %s", p, percentileFine([]time.Duration{phases[p]}, 50))
	}
	t.Log(b.String())
}

// firstFullTrace is the first full sync's trace line of a log, or "".
func firstFullTrace(log string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"Sync trace"`) && strings.Contains(line, "full=true") {
			return line
		}
	}
	return ""
}

// reportTrace logs the p50 of every phase for the changes and the new
// services of one proxy.
func reportTrace(t *testing.T, proxy string, d *framework.Daemon, r scaleResult) {
	log, err := d.LogFrom(0)
	if err != nil {
		t.Errorf("trace: %v", err)
		return
	}
	traces := parseTraces(log)
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s: where the time goes, p50 per phase (API write begins at 0; %d sync traces)\n| write | n | %s | total |\n|---|---|%s---|\n",
		proxy, len(traces), strings.Join(tracePhases, " | "), strings.Repeat("---|", len(tracePhases)))
	for _, row := range []struct {
		name string
		cs   []timedChange
	}{{"one-endpoint change", r.changes}, {"new service", r.news}} {
		bd := breakdown(row.cs, traces)
		fmt.Fprintf(&b, "| %s | %d |", row.name, len(bd["api"]))
		for _, p := range tracePhases {
			fmt.Fprintf(&b, " %s |", percentileFine(bd[p], 50))
		}
		fmt.Fprintf(&b, " %s |\n", percentileFine(latencies(row.cs), 50))
	}
	t.Log(b.String())
}

// percentileFine is percentile to a tenth of a millisecond.
func percentileFine(ds []time.Duration, p int) string {
	v, ok := nth(ds, p)
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", float64(v.Microseconds())/1000)
}
