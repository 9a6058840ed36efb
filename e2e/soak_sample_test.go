//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// soakSample is one proxy's sample.
type soakSample struct {
	at                  time.Duration // since the churn started
	rss, hwm, heap      int64
	goroutines, fds     int
	syncs               uint64  // syncs since the last sample
	syncP99             float64 // seconds, over those syncs; -1 without any
	failures            int     // sync failures since the start (metrics)
	check               soakCheck
	probes, probeFailed int     // since the last sample
	load                float64 // the machine's 1-minute load average
	metricsErr, procErr error
}

const soakHeader = "| min | proxy | RSS MB | VmHWM MB | Go heap MB | goroutines | fds | syncs | sync p99 | sync failures | kernel svc/eps | API svc/eps | lag | probes ok/failed | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"

// soakSyncMetric is the sync duration histogram both proxies export.
const soakSyncMetric = "kubeproxy_sync_proxy_rules_duration_seconds"

// soakFailureMetrics are each proxy's failed-sync counters: switchyard's
// own (every backend), kube-proxy's per mode.
func soakFailureMetrics(p *soakProxy) []string {
	if p.name == "switchyard" {
		return []string{"switchyard_sync_errors_total"}
	}
	return []string{
		"kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
		"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total",
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
		"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total",
	}
}

// soakSampleLoop samples every proxy every cfg.sample until the run's
// minutes have passed or a signal comes, printing each row as it goes.
func soakSampleLoop(t *testing.T, cfg soakConfig, proxies []*soakProxy, api *soakAPI, start time.Time, interrupt <-chan os.Signal) {
	t.Helper()
	end := start.Add(time.Duration(cfg.minutes) * time.Minute)
	for next := start; ; next = next.Add(cfg.sample) {
		for time.Until(next) < -cfg.sample/2 { // a slow sample: skip the slots it overran
			next = next.Add(cfg.sample)
		}
		select {
		case sig := <-interrupt:
			fmt.Fprintf(cfg.out, "soak: %v after %.1f min: the run ends here\n", sig, time.Since(start).Minutes())
			return
		case <-time.After(time.Until(next)):
		}
		for _, p := range proxies {
			if p.exited != nil {
				continue
			}
			if exited, err := p.d.Exited(); exited {
				p.exited = fmt.Errorf("exited (%v) %s into the run:\n%s", err, time.Since(start).Round(time.Second), p.d.LogTail(20))
				t.Errorf("%s %v", p.name, p.exited)
				continue
			}
			s := soakTake(t, p, api, time.Since(start))
			p.samples = append(p.samples, s)
			fmt.Fprintln(cfg.out, soakRow(p.name, s))
		}
		if !time.Now().Add(cfg.sample / 2).Before(end) {
			return
		}
	}
}

// soakTake takes one sample of p.
func soakTake(t *testing.T, p *soakProxy, api *soakAPI, at time.Duration) soakSample {
	s := soakSample{at: at, syncP99: -1, load: loadAverage()}
	pid := p.d.PID()
	m, err := framework.ReadMemory(pid)
	s.rss, s.hwm = m.RSS, m.Peak
	s.fds, s.procErr = joinErr(err)(framework.OpenFDs(pid))
	s.metricsErr = soakScrape(t, p, &s)
	s.check = api.check(p, soakBound(p, s.syncP99))
	switch {
	case s.check.err != nil:
		p.unread++
	case !s.check.ok:
		p.mismatches++
	}
	p.maxLag = max(p.maxLag, s.check.lag)
	soakProbes(p, &s)
	return s
}

// soakScrape fills s from p's metrics: Go heap, goroutines, sync
// failures, the syncs since the last sample and their p99.
func soakScrape(t *testing.T, p *soakProxy, s *soakSample) error {
	text, err := p.d.Metrics(t.Context())
	if err != nil {
		return err
	}
	heap, err := framework.ParseMetric(text, "go_memstats_heap_inuse_bytes", nil)
	if err != nil {
		return err
	}
	gor, err := framework.ParseMetric(text, "go_goroutines", nil)
	if err != nil {
		return err
	}
	s.heap, s.goroutines = int64(heap), int(gor)
	for _, name := range soakFailureMetrics(p) {
		if v, err := framework.ParseMetric(text, name, nil); err == nil { // a vector with no sample yet is absent
			s.failures += int(v)
		}
	}
	h, err := framework.ParseHistogram(text, soakSyncMetric, nil)
	if err != nil {
		return err
	}
	d := h.Since(p.prevHist)
	p.prevHist = h
	s.syncs = d.Count
	if q, ok := d.Quantile(0.99); ok {
		s.syncP99 = q
	}
	return nil
}

// soakProbes counts the probes since the last sample into s and p.
func soakProbes(p *soakProxy, s *soakSample) {
	res := p.probe.Results()
	for _, r := range res[p.probesSeen:] {
		s.probes++
		if r.Err == nil {
			p.servers[r.Server]++
			continue
		}
		s.probeFailed++
		p.failKinds[soakFailureKind(r.Err)]++
		if len(p.firstFails) < 5 {
			p.firstFails = append(p.firstFails, fmt.Sprintf("%s (minute %.1f): %v", r.At.UTC().Format(time.TimeOnly), r.At.Sub(p.start).Minutes(), r.Err))
		}
	}
	p.probesSeen = len(res)
	p.probeFailed += s.probeFailed
}

func joinErr(prev error) func(int, error) (int, error) {
	return func(n int, err error) (int, error) {
		if prev != nil {
			return n, prev
		}
		return n, err
	}
}

// soakBound is how long the kernel may lag the API: a change that comes
// during a sync is in the kernel at the end of the next one, so two syncs
// (the highest p99 of any window so far, this one's included, at least
// 1 s each), the minimum sync period (1 s), and the informers' and the
// check's own delays (3 s).
func soakBound(p *soakProxy, now float64) time.Duration {
	p99 := max(1, now)
	for _, s := range p.samples {
		p99 = max(p99, s.syncP99)
	}
	return time.Duration(2*p99*float64(time.Second)) + 4*time.Second
}

func soakRow(proxy string, s soakSample) string {
	p99 := "-"
	if s.syncP99 >= 0 {
		p99 = fmt.Sprintf("%.3fs", s.syncP99)
	}
	lag := fmt.Sprintf("%.1fs", s.check.lag.Seconds())
	switch {
	case s.check.err != nil:
		lag = fmt.Sprintf("UNREAD (%v)", s.check.err)
	case !s.check.ok:
		lag = fmt.Sprintf("MISMATCH after %.0fs", s.check.lag.Seconds())
	}
	row := fmt.Sprintf("| %.1f | %s | %.1f | %.1f | %.1f | %d | %d | %d | %s | %d | %d/%d | %d/%d | %s | %d/%d | %.0f |",
		s.at.Minutes(), proxy, mb(s.rss), mb(s.hwm), mb(s.heap), s.goroutines, s.fds, s.syncs, p99, s.failures,
		s.check.kernel.Services, s.check.kernel.Endpoints, s.check.api.Services, s.check.api.Endpoints, lag,
		s.probes-s.probeFailed, s.probeFailed, s.load)
	for _, err := range []error{s.metricsErr, s.procErr} {
		if err != nil {
			row += " " + err.Error()
		}
	}
	return row
}

// soakSlopes are the least-squares slopes per hour of RSS (MB),
// goroutines and fds over the samples after the warm-up, and the window
// they cover.
type soakSlopes struct {
	rss, goroutines, fds     float64
	meanRSS, meanGor, meanFD float64
	window                   time.Duration
	points                   int
}

func soakFit(samples []soakSample, warmup time.Duration) soakSlopes {
	var xs, rss, gor, fds []float64
	var first, last time.Duration
	for _, s := range samples {
		if s.at < warmup || s.procErr != nil || s.metricsErr != nil {
			continue
		}
		if len(xs) == 0 {
			first = s.at
		}
		last = s.at
		xs = append(xs, s.at.Hours())
		rss, gor, fds = append(rss, mb(s.rss)), append(gor, float64(s.goroutines)), append(fds, float64(s.fds))
	}
	f := soakSlopes{window: last - first, points: len(xs)}
	f.rss, _ = framework.Slope(xs, rss)
	f.goroutines, _ = framework.Slope(xs, gor)
	f.fds, _ = framework.Slope(xs, fds)
	f.meanRSS, f.meanGor, f.meanFD = mean(rss), mean(gor), mean(fds)
	return f
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// trends names the series whose fitted rise over the window is above
// the noise allowance: 5 % of its mean, and at least 2 MB of RSS, 2
// goroutines, 2 fds.
func (f soakSlopes) trends() []string {
	h := f.window.Hours()
	var out []string
	for _, c := range []struct {
		name               string
		slope, mean, floor float64
	}{{"RSS", f.rss, f.meanRSS, 2}, {"goroutines", f.goroutines, f.meanGor, 2}, {"fds", f.fds, f.meanFD, 2}} {
		if rise := c.slope * h; rise > math.Max(0.05*c.mean, c.floor) {
			out = append(out, fmt.Sprintf("%s rises %.1f over %.0f min (%.2f/h, mean %.1f)", c.name, rise, f.window.Minutes(), c.slope, c.mean))
		}
	}
	return out
}

// loadAverage is the machine's 1-minute load average (-1 if unreadable).
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var v float64
	if _, err := fmt.Sscan(string(b), &v); err != nil {
		return -1
	}
	return v
}

// soakFailureKind sorts a failed probe: "refused" (a TCP reset to the
// SYN: a proxy rejecting a Service it holds no endpoint for), "reset",
// "timeout" (no answer: a packet dropped or not DNATed, or a starved
// machine), or "other".
func soakFailureKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "other"
}

// soakLogFailures counts the proxy's log lines about a failed sync.
func soakLogFailures(p *soakProxy) int {
	b, err := os.ReadFile(p.d.LogPath)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "Sync failed")
}

// soakReport prints the summary table side by side, the churn done and one
// result line per proxy, and fails the test on switchyard's sync
// failures, failed probes, mismatches or upward trends (kube-proxy's are
// reported, not failed: it is the reference).
func soakReport(t *testing.T, cfg soakConfig, proxies []*soakProxy, churn *soakChurn, elapsed time.Duration) {
	t.Helper()
	fmt.Fprintf(cfg.out, "\n%s", churn.summary(elapsed))
	fits := make([]soakSlopes, len(proxies))
	for i, p := range proxies {
		fits[i] = soakFit(p.samples, cfg.warmup)
	}
	fmt.Fprintln(cfg.out, soakTable(cfg, proxies, fits))
	for i, p := range proxies {
		f := fits[i]
		fmt.Fprintf(cfg.out, "soak: proxy=%s minutes=%d rss_mb_per_h=%.2f goroutines_per_h=%.2f fds_per_h=%.2f sync_failures=%d failed_connections=%d mismatches=%d\n",
			p.name, int(elapsed.Minutes()+0.5), f.rss, f.goroutines, f.fds, soakFailures(p), p.probeFailed, p.mismatches)
		for _, pr := range soakProblems(p, f) {
			if p.name == "switchyard" {
				t.Errorf("%s: %s", p.name, pr)
			} else {
				t.Logf("%s (reference, not failed): %s", p.name, pr)
			}
		}
	}
}

// soakTable is the summary, the proxies side by side.
func soakTable(cfg soakConfig, proxies []*soakProxy, fits []soakSlopes) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n| after %s, %d min | %s |\n|---|", cfg.warmup, cfg.minutes, strings.Join(soakNames(proxies), " | "))
	for range proxies {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	span := func(v func(soakSample) float64, format string) func(*soakProxy, soakSlopes) string {
		return func(p *soakProxy, _ soakSlopes) string { return soakSpan(p.samples, cfg.warmup, v, format) }
	}
	rows := []struct {
		name string
		cell func(p *soakProxy, f soakSlopes) string
	}{
		{"RSS MB (first / last / max)", span(func(s soakSample) float64 { return mb(s.rss) }, "%.1f")},
		{"RSS slope", func(_ *soakProxy, f soakSlopes) string { return fmt.Sprintf("%+.2f MB/h", f.rss) }},
		{"VmHWM MB (end)", func(p *soakProxy, _ soakSlopes) string { return fmt.Sprintf("%.1f", mb(soakLast(p).hwm)) }},
		{"Go heap in use MB (first / last / max)", span(func(s soakSample) float64 { return mb(s.heap) }, "%.1f")},
		{"goroutines (first / last / max)", span(func(s soakSample) float64 { return float64(s.goroutines) }, "%.0f")},
		{"goroutine slope", func(_ *soakProxy, f soakSlopes) string { return fmt.Sprintf("%+.2f /h", f.goroutines) }},
		{"open fds (first / last / max)", span(func(s soakSample) float64 { return float64(s.fds) }, "%.0f")},
		{"fd slope", func(_ *soakProxy, f soakSlopes) string { return fmt.Sprintf("%+.2f /h", f.fds) }},
		{"syncs", func(p *soakProxy, _ soakSlopes) string { return fmt.Sprint(soakSyncs(p)) }},
		{"machine load average (median / max at the samples)", func(p *soakProxy, _ soakSlopes) string { return soakLoad(p) }},
		{"sync p99 (median / max of the 30 s windows)", func(p *soakProxy, _ soakSlopes) string { return soakP99s(p) }},
		{"sync failures", func(p *soakProxy, _ soakSlopes) string { return fmt.Sprint(soakFailures(p)) }},
		{"kernel vs API mismatches (samples)", func(p *soakProxy, _ soakSlopes) string {
			return fmt.Sprintf("%d of %d (longest lag %.1fs; kernel unreadable in %d)", p.mismatches, len(p.samples), p.maxLag.Seconds(), p.unread)
		}},
		{"probes (failed)", func(p *soakProxy, _ soakSlopes) string {
			return fmt.Sprintf("%d (%d: %v) answered by %v", p.probesSeen, p.probeFailed, p.failKinds, p.servers)
		}},
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s |", r.name)
		for i, p := range proxies {
			fmt.Fprintf(&b, " %s |", r.cell(p, fits[i]))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// soakProblems is what fails the pass criteria for p.
func soakProblems(p *soakProxy, f soakSlopes) []string {
	var problems []string
	if p.exited != nil {
		problems = append(problems, "the process "+p.exited.Error())
	}
	if f.points < 3 {
		problems = append(problems, fmt.Sprintf("only %d samples after the warm-up: no slope", f.points))
	}
	problems = append(problems, f.trends()...)
	if failures := soakFailures(p); failures > 0 {
		problems = append(problems, fmt.Sprintf("%d failed syncs", failures))
	}
	if p.probeFailed > 0 {
		problems = append(problems, fmt.Sprintf("%d failed probes %v, the first: %s", p.probeFailed, p.failKinds, strings.Join(p.firstFails, "; ")))
	}
	if p.unread > 0 {
		problems = append(problems, fmt.Sprintf("the kernel could not be read in %d samples", p.unread))
	}
	if p.mismatches > 0 {
		problems = append(problems, fmt.Sprintf("the kernel disagreed with the API in %d samples", p.mismatches))
	}
	return problems
}

func soakNames(proxies []*soakProxy) []string {
	var out []string
	for _, p := range proxies {
		out = append(out, p.name)
	}
	return out
}

func soakLast(p *soakProxy) soakSample {
	if len(p.samples) == 0 {
		return soakSample{}
	}
	return p.samples[len(p.samples)-1]
}

// soakSpan is first / last / max of v over the samples after warmup.
func soakSpan(samples []soakSample, warmup time.Duration, v func(soakSample) float64, format string) string {
	var first, last, hi float64
	n := 0
	for _, s := range samples {
		if s.at < warmup {
			continue
		}
		x := v(s)
		if n == 0 {
			first = x
		}
		last, hi = x, math.Max(hi, x)
		n++
	}
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf(format+" / "+format+" / "+format, first, last, hi)
}

func soakLoad(p *soakProxy) string {
	var ls []float64
	for _, s := range p.samples {
		ls = append(ls, s.load)
	}
	if len(ls) == 0 {
		return "-"
	}
	slices.Sort(ls)
	return fmt.Sprintf("%.0f / %.0f", ls[len(ls)/2], ls[len(ls)-1])
}

func soakSyncs(p *soakProxy) uint64 {
	var n uint64
	for _, s := range p.samples {
		n += s.syncs
	}
	return n
}

func soakP99s(p *soakProxy) string {
	var ds []time.Duration
	for _, s := range p.samples {
		if s.syncP99 >= 0 {
			ds = append(ds, time.Duration(s.syncP99*float64(time.Second)))
		}
	}
	return percentile(ds, 50) + " / " + percentile(ds, 100)
}

// soakFailures is the proxy's failed syncs: its counters at the last
// sample, or its log's "Sync failed" lines if those are more.
func soakFailures(p *soakProxy) int {
	return max(soakLast(p).failures, soakLogFailures(p))
}

// soakSyncHistogram scrapes p's sync duration histogram.
func soakSyncHistogram(ctx context.Context, p *soakProxy) (framework.Histogram, error) {
	text, err := p.d.Metrics(ctx)
	if err != nil {
		return framework.Histogram{}, err
	}
	return framework.ParseHistogram(text, soakSyncMetric, nil)
}
