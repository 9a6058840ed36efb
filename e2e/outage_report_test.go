//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// outRow is one proxy's figures in one scenario.
type outRow struct {
	scenario, line, proxy string
	down                  time.Duration // 0: a restart
	total, failed         int
	catchUp               outCatchUp
	beforeRSS, peakRSS    int64
	lists, fromRV         map[string]int // per resource (audit log)
	healthDown, healthUp  outHealth
	restErrors            float64 // API requests that got no answer
	failures              []outFailure
	unexplained           int // failures with no direct probe failing near them
	controlFailed         int // direct probes (no Service) that failed
}

// resultLine is the row's machine-readable line. catchup_s is when the
// change was in the kernel at the latest; health_unanswered counts polls
// of /healthz and /livez that got no answer in time.
func (r outRow) resultLine() string {
	catchUp := "none"
	if r.catchUp.err == nil {
		catchUp = fmt.Sprintf("%.1f", r.catchUp.by.Seconds())
	}
	healthz, livez := mergeCounts(r.healthDown.healthz, r.healthUp.healthz), mergeCounts(r.healthDown.livez, r.healthUp.livez)
	return fmt.Sprintf("%s: proxy=%s down_s=%.0f failed_connections=%d catchup_s=%s peak_rss_mb=%.0f connections=%d lists=%d watches_from_rv=%d api_errors=%.0f healthz_non200=%d livez_non200=%d health_unanswered=%d failed_without_stall=%d direct_failed=%d",
		r.line, r.proxy, r.down.Seconds(), r.failed, catchUp, mb(r.peakRSS), r.total,
		sumCounts(r.lists), sumCounts(r.fromRV), r.restErrors,
		non200(healthz)-healthz[0], non200(livez)-livez[0], healthz[0]+livez[0], r.unexplained, r.controlFailed)
}

// outWriter collects the rows and prints the table and the result lines
// at the end, to stdout and SWITCHYARD_OUTAGE_OUT.
type outWriter struct {
	w    io.Writer
	rows []outRow
}

func newOutWriter(t *testing.T) *outWriter {
	t.Helper()
	o := &outWriter{w: os.Stdout}
	if f := os.Getenv(outOutEnv); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		o.w = io.MultiWriter(os.Stdout, w)
	}
	return o
}

func (o *outWriter) add(r outRow) { o.rows = append(o.rows, r) }

// flush prints the Markdown table, then one result line per row.
func (o *outWriter) flush(t *testing.T) {
	t.Helper()
	var b strings.Builder
	b.WriteString("\n| scenario | proxy | connections failed / made (direct probes failed) | catch-up (s, between) | RSS before → peak (MB) | full lists | watches from last RV | API requests unanswered | /healthz while down | /healthz catching up | /livez |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range o.rows {
		catchUp := "not within " + outCatchUpLimit.String()
		if r.catchUp.err == nil {
			catchUp = fmt.Sprintf("%.1f–%.1f", r.catchUp.after.Seconds(), r.catchUp.by.Seconds())
		}
		livez := mergeCounts(r.healthDown.livez, r.healthUp.livez)
		fmt.Fprintf(&b, "| %s | %s | %d / %d (%d) | %s | %.0f → %.0f | %s | %s | %.0f | %s | %s | %s |\n",
			r.scenario, r.proxy, r.failed, r.total, r.controlFailed, catchUp, mb(r.beforeRSS), mb(r.peakRSS),
			formatCounts(r.lists), formatCounts(r.fromRV), r.restErrors, formatCodes(r.healthDown.healthz), formatCodes(r.healthUp.healthz), formatCodes(livez))
	}
	b.WriteString("\n")
	for _, r := range o.rows {
		b.WriteString(r.resultLine() + "\n")
	}
	if _, err := io.WriteString(o.w, b.String()); err != nil {
		t.Error(err)
	}
}

func sumCounts[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func non200(codes map[int]int) int { return sumCounts(codes) - codes[200] }

func mergeCounts(a, b map[int]int) map[int]int {
	out := maps.Clone(a)
	if out == nil {
		out = map[int]int{}
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

// formatCounts writes "endpointslices 1, services 1" ("0" when empty).
func formatCounts(m map[string]int) string {
	if sumCounts(m) == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// formatCodes writes "200×240, 503×3" (code 0: no answer); "-" when empty.
func formatCodes(m map[int]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		name := fmt.Sprint(k)
		if k == 0 {
			name = "no answer"
		}
		parts = append(parts, fmt.Sprintf("%s×%d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}
