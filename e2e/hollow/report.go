package hollow

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// result is what one measurement (one proxy's N hollows) measured.
type result struct {
	proxy string
	n     int
	// ready: start to every proxy's initial lists handed over (switchyard:
	// every node's first sync), and the apiserver's CPU meanwhile.
	ready, readyCPU time.Duration
	// readyProxyCPU is what the hollow processes used until then.
	readyProxyCPU time.Duration
	// quietCPU: the apiserver's CPU over quietWindow.
	quietCPU time.Duration
	// probeCPU over probeWall: the apiserver's CPU during the changes.
	probeCPU, probeWall time.Duration
	changes             int
	// watchBytes and watchEvents: what the apiserver sent on watches
	// during the changes (apiserver_watch_events_sizes, _total).
	watchBytes, watchEvents float64
	apiRSS                  int64
	// fanout: each change's write to its last proxy; each: every proxy's.
	fanout, each []time.Duration
	missed       int // (change, proxy) pairs never seen
	// proxyRSS and proxyAnon are each hollow process's RSS after the
	// changes, and its anonymous part (its own memory; the rest is the
	// binary's pages, shared between kubemark's processes).
	proxyRSS, proxyAnon []int64
	// proxyCPU is the hollow processes' CPU during the changes.
	proxyCPU time.Duration
}

// perProxyMB is the memory per hollow proxy: the process's RSS over N
// for switchyard's one process, the mean RSS for kubemark's N.
func (r result) perProxyMB() float64 { return r.perProxy(r.proxyRSS) }

// perProxyAnonMB is perProxyMB of the anonymous memory.
func (r result) perProxyAnonMB() float64 { return r.perProxy(r.proxyAnon) }

func (r result) perProxy(bytes []int64) float64 {
	var sum int64
	for _, b := range bytes {
		sum += b
	}
	return float64(sum) / float64(max(r.n, 1)) / (1 << 20)
}

func (r result) perChange(d time.Duration) float64 {
	return ms(d) / float64(max(r.changes, 1))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// quietCores is the apiserver's CPU over the quiet window, in cores.
func (r result) quietCores(window time.Duration) float64 {
	return r.quietCPU.Seconds() / window.Seconds()
}

// writeTable writes the results as a Markdown table, one row per count and
// proxy, the proxies of one count side by side.
func writeTable(w io.Writer, rs []result, window time.Duration) {
	fmt.Fprintln(w, "| N | proxy | all ready (proxies' CPU) | apiserver CPU: start / idle / per change | watch bytes per change | apiserver RSS | per proxy: RSS (anonymous) | proxies' CPU per change | fan-out p50 / p99 | one proxy p50 / p99 | missed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range sorted(rs) {
		fmt.Fprintf(w, "| %d | %s | %.1f s (%.1f s) | %.1f s / %.3f cores / %.1f ms | %.0f kB | %.0f MB | %.1f (%.1f) MB | %.1f ms | %.0f / %.0f ms | %.0f / %.0f ms | %d |\n",
			r.n, r.proxy, r.ready.Seconds(), r.readyProxyCPU.Seconds(), r.readyCPU.Seconds(), r.quietCores(window), r.perChange(r.probeCPU),
			r.watchBytes/float64(max(r.changes, 1))/1000, mb(r.apiRSS), r.perProxyMB(), r.perProxyAnonMB(), r.perChange(r.proxyCPU),
			ms(percentile(r.fanout, 50)), ms(percentile(r.fanout, 99)), ms(percentile(r.each, 50)), ms(percentile(r.each, 99)), r.missed)
	}
}

func sorted(rs []result) []result {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b result) int { return a.n - b.n })
	return out
}

// projected is one quantity's least-squares line over the counts measured
// and its value at a count.
type projected struct {
	name, unit string
	fit        line
	at         float64
}

// project fits each quantity of one proxy's results against N and gives
// its value at n nodes; nil with fewer than two counts.
func project(rs []result, n int, window time.Duration) []projected {
	quantities := []struct {
		name, unit string
		of         func(result) float64
	}{
		{"apiserver CPU, all proxies' initial lists", "s", func(r result) float64 { return r.readyCPU.Seconds() }},
		{"proxies' CPU, initial lists (per proxy)", "s", func(r result) float64 { return r.readyProxyCPU.Seconds() / float64(max(r.n, 1)) }},
		{"apiserver CPU, idle with N watching", "cores", func(r result) float64 { return r.quietCores(window) }},
		{"apiserver CPU per endpoint change", "ms", func(r result) float64 { return r.perChange(r.probeCPU) }},
		{"watch bytes per endpoint change", "kB", func(r result) float64 { return r.watchBytes / float64(max(r.changes, 1)) / 1000 }},
		{"apiserver RSS", "MB", func(r result) float64 { return mb(r.apiRSS) }},
		{"memory per proxy (RSS)", "MB", func(r result) float64 { return r.perProxyMB() }},
		{"memory per proxy (anonymous)", "MB", func(r result) float64 { return r.perProxyAnonMB() }},
		{"fan-out p50", "ms", func(r result) float64 { return ms(percentile(r.fanout, 50)) }},
		{"fan-out p99", "ms", func(r result) float64 { return ms(percentile(r.fanout, 99)) }},
	}
	var xs []float64
	for _, r := range rs {
		xs = append(xs, float64(r.n))
	}
	var out []projected
	for _, q := range quantities {
		var ys []float64
		for _, r := range rs {
			ys = append(ys, q.of(r))
		}
		l, ok := fitLine(xs, ys)
		if !ok {
			return nil
		}
		out = append(out, projected{name: q.name, unit: q.unit, fit: l, at: l.At(float64(n))})
	}
	return out
}

// writeProjection writes, per proxy, each quantity's fit and its value at
// n nodes.
func writeProjection(w io.Writer, rs []result, proxies []string, n int, window time.Duration) {
	fmt.Fprintf(w, "| quantity | proxy | intercept | slope per node | at %d nodes |\n|---|---|---|---|---|\n", n)
	byProxy := map[string][]result{}
	for _, r := range rs {
		byProxy[r.proxy] = append(byProxy[r.proxy], r)
	}
	rows := map[string][]string{}
	var order []string
	for _, p := range proxies {
		for _, q := range project(byProxy[p], n, window) {
			if _, seen := rows[q.name]; !seen {
				order = append(order, q.name)
			}
			rows[q.name] = append(rows[q.name], fmt.Sprintf("| %s (%s) | %s | %.4g | %.4g | %.4g |", q.name, q.unit, p, q.fit.Intercept, q.fit.Slope, q.at))
		}
	}
	for _, name := range order {
		fmt.Fprintln(w, strings.Join(rows[name], "\n"))
	}
}

// resultLine is the machine-readable line of one proxy's largest run.
func resultLine(r result) string {
	return fmt.Sprintf("hollow: proxy=%s n=%d fanout_p50_ms=%.1f fanout_p99_ms=%.1f apiserver_cpu_s=%.2f per_proxy_mb=%.1f",
		r.proxy, r.n, ms(percentile(r.fanout, 50)), ms(percentile(r.fanout, 99)), r.probeCPU.Seconds(), r.perProxyMB())
}

// largest is each proxy's result at the largest count, in proxies' order.
func largest(rs []result, proxies []string) []result {
	var out []result
	for _, p := range proxies {
		best := -1
		for i, r := range rs {
			if r.proxy == p && (best < 0 || r.n > rs[best].n) {
				best = i
			}
		}
		if best >= 0 {
			out = append(out, rs[best])
		}
	}
	return out
}
