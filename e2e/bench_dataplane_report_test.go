//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// dpKey names one measured series: a path, a via and a workload at one N.
type dpKey struct {
	n                          int
	mode, proxy, via, workload string
}

// dpFigure is a series' medians over its rounds.
type dpFigure struct {
	rate, p50, p99, kernel, busy float64
	spread                       float64 // (max - min) / median of the rate
	rounds, failed               int
}

func dpFigures(samples []dpSample) map[dpKey]dpFigure {
	groups := map[dpKey][]dpSample{}
	for _, s := range samples {
		k := dpKey{s.n, s.mode, s.proxy, s.via, s.workload}
		groups[k] = append(groups[k], s)
	}
	out := map[dpKey]dpFigure{}
	for k, ss := range groups {
		var rate, p50, p99, kernel, busy []float64
		f := dpFigure{}
		for _, s := range ss {
			if s.err != nil {
				f.failed++
				continue
			}
			rate, p50, p99 = append(rate, s.res.Rate), append(p50, s.res.ConnectP50), append(p99, s.res.ConnectP99)
			kernel, busy = append(kernel, s.res.KernelPerOp), append(busy, s.res.BusyPerOp)
		}
		f.rounds = len(rate)
		f.rate, f.p50, f.p99, f.kernel, f.busy = median(rate), median(p50), median(p99), median(kernel), median(busy)
		if f.rate > 0 {
			f.spread = (slices.Max(rate) - slices.Min(rate)) / f.rate
		}
		out[k] = f
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// dpDirect is the direct path's key for k: pod to pod for clusterip,
// external client to pod for the NodePorts.
func dpDirect(k dpKey) dpKey {
	d := dpKey{n: k.n, mode: "direct", proxy: "none", via: "clusterip", workload: k.workload}
	if k.via != "clusterip" {
		d.via = "nodeport"
	}
	return d
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// dpUnits are the result lines' workload names and units, per load
// generator workload; stream rates are bits/s, printed in Gbit/s.
var dpUnits = map[string]struct {
	name, unit string
	scale      float64
}{
	"short":  {"short-tcp", "conn/s", 1},
	"stream": {"stream", "Gbit/s", 1e-9},
	"udp":    {"udp-rr", "req/s", 1},
}

// dpReport prints the table for one N and its result lines.
func dpReport(t *testing.T, cfg dpConfig, n int, samples []dpSample) {
	t.Helper()
	figs := dpFigures(samples)
	keys := dpSortedKeys(figs, cfg)
	var b strings.Builder
	where := ""
	if cfg.envLabel != "" {
		where = ", " + cfg.envLabel
	}
	fmt.Fprintf(&b, "\n%d Services, family=%s (medians of %d rounds of %s; ratio to direct in brackets%s)\n", n, cfg.shape, cfg.rounds, cfg.duration, where)
	b.WriteString("| path | via | short TCP conn/s | kernel µs/conn | connect p50 / p99 µs (1 client) | stream Gbit/s | UDP req/s | spread |\n|---|---|---|---|---|---|---|---|\n")
	rows := map[[3]string]bool{}
	for _, k := range keys {
		row := [3]string{k.proxy, k.mode, k.via}
		if rows[row] {
			continue
		}
		rows[row] = true
		b.WriteString(dpRow(figs, k))
	}
	for _, k := range keys {
		b.WriteString(dpLines(figs, k, cfg.familyField()+cfg.envField()))
	}
	b.WriteString(dpProxyRatios(figs, n, cfg))
	fmt.Fprint(cfg.out, b.String())
}

func dpSortedKeys(figs map[dpKey]dpFigure, cfg dpConfig) []dpKey {
	order := func(k dpKey) int {
		i := slices.Index(cfg.paths, k.proxy+":"+k.mode)
		if k.proxy == "none" {
			i = -1
		}
		return (i+1)*100 + slices.Index(cfg.vias, k.via)*10 + slices.Index(cfg.workloads, k.workload)
	}
	keys := make([]dpKey, 0, len(figs))
	for k := range figs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b dpKey) int { return order(a) - order(b) })
	return keys
}

// dpRow is one table row: a path through one via, every workload.
func dpRow(figs map[dpKey]dpFigure, k dpKey) string {
	cell := func(w string, scale float64, format string) string {
		kk := k
		kk.workload = w
		f, ok := figs[kk]
		if !ok || f.rounds == 0 {
			return "-"
		}
		s := fmt.Sprintf(format, f.rate*scale)
		if k.proxy != "none" {
			s += fmt.Sprintf(" (%.2f)", ratio(f.rate, figs[dpDirect(kk)].rate))
		}
		return s
	}
	short, lat := figs[dpWith(k, "short")], figs[dpWith(k, "latency")]
	var spread float64
	for _, w := range []string{"short", "latency", "stream", "udp"} {
		spread = max(spread, figs[dpWith(k, w)].spread)
	}
	kernel, latency := "-", "-"
	if short.rounds > 0 {
		kernel = fmt.Sprintf("%.0f", short.kernel)
	}
	if lat.rounds > 0 {
		latency = fmt.Sprintf("%.0f / %.0f", lat.p50, lat.p99)
	}
	via := k.via
	if k.proxy == "none" {
		via = map[string]string{"clusterip": "pod to pod", "nodeport": "external to pod"}[k.via]
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %.0f %% |\n", strings.TrimPrefix(k.proxy+" "+k.mode, "none "), via,
		cell("short", 1, "%.0f"), kernel, latency, cell("stream", 1e-9, "%.2f"), cell("udp", 1, "%.0f"), 100*spread)
}

func dpWith(k dpKey, w string) dpKey { k.workload = w; return k }

// dpLines are the machine-readable lines of one series; tags is appended
// to each (" family=ipv4", then " env=vm-tcg" in the VM).
func dpLines(figs map[dpKey]dpFigure, k dpKey, tags string) string {
	f := figs[k]
	if f.rounds == 0 {
		return fmt.Sprintf("dataplane: n=%d path=%s proxy=%s via=%s workload=%s value=failed rounds_failed=%d%s\n", k.n, k.mode, k.proxy, k.via, k.workload, f.failed, tags)
	}
	d := figs[dpDirect(k)]
	head := fmt.Sprintf("dataplane: n=%d path=%s proxy=%s via=%s", k.n, k.mode, k.proxy, k.via)
	if k.workload == "latency" {
		return fmt.Sprintf("%s workload=connect-p50 value=%.0f unit=us ratio_direct=%.2f%s\n%s workload=connect-p99 value=%.0f unit=us ratio_direct=%.2f%s\n",
			head, f.p50, ratio(f.p50, d.p50), tags, head, f.p99, ratio(f.p99, d.p99), tags)
	}
	u := dpUnits[k.workload]
	cpu := "kernel_us_per_conn"
	switch k.workload {
	case "stream":
		cpu = "kernel_us_per_mb"
	case "udp":
		cpu = "kernel_us_per_req"
	}
	return fmt.Sprintf("%s workload=%s value=%.4g unit=%s ratio_direct=%.2f %s=%.1f busy_us_per_op=%.1f spread=%.2f rounds=%d%s\n",
		head, u.name, f.rate*u.scale, u.unit, ratio(f.rate, d.rate), cpu, f.kernel, f.busy, f.spread, f.rounds, tags)
}

// dpProxyRatios are switchyard / kube-proxy per mode, via and workload
// (switchyard's iptables mode on iptables-nft, as kube-proxy's), tagged
// as dpLines are.
func dpProxyRatios(figs map[dpKey]dpFigure, n int, cfg dpConfig) string {
	var b strings.Builder
	tags := cfg.familyField() + cfg.envField()
	for _, mode := range []string{"iptables", "nftables"} {
		for _, via := range cfg.vias {
			for _, w := range cfg.workloads {
				sy := figs[dpKey{n, mode, "switchyard", via, w}]
				kp := figs[dpKey{n, mode, "kube-proxy", via, w}]
				if sy.rounds == 0 || kp.rounds == 0 {
					continue
				}
				if w == "latency" {
					fmt.Fprintf(&b, "dataplane: n=%d mode=%s via=%s workload=connect-p50 switchyard=%.0f kube-proxy=%.0f ratio=%.2f%s\n", n, mode, via, sy.p50, kp.p50, ratio(sy.p50, kp.p50), tags)
					continue
				}
				u := dpUnits[w]
				fmt.Fprintf(&b, "dataplane: n=%d mode=%s via=%s workload=%s switchyard=%.4g kube-proxy=%.4g ratio=%.2f%s\n", n, mode, via, u.name, sy.rate*u.scale, kp.rate*u.scale, ratio(sy.rate, kp.rate), tags)
			}
		}
	}
	return b.String()
}

// dpSummary prints the run's one result line: what was measured, how
// noisy it was, and where switchyard fell below kube-proxy by more than
// the noise (short connections and UDP rate 10 % or more below).
func dpSummary(t *testing.T, cfg dpConfig, sizes []int, samples []dpSample) {
	t.Helper()
	figs := dpFigures(samples)
	var spreads []float64
	failed := 0
	var below []string
	for k, f := range figs {
		failed += f.failed
		if f.rounds > 1 {
			spreads = append(spreads, f.spread)
		}
		if k.proxy != "switchyard" || k.workload == "latency" {
			continue
		}
		kp, ok := figs[dpKey{k.n, k.mode, "kube-proxy", k.via, k.workload}]
		if ok && kp.rounds > 0 && f.rate < 0.9*kp.rate {
			below = append(below, fmt.Sprintf("%s/%s/%s@%d:%.2f", k.mode, k.via, k.workload, k.n, ratio(f.rate, kp.rate)))
		}
	}
	slices.Sort(below)
	if len(below) == 0 {
		below = []string{"none"}
	}
	var ns []string
	for _, n := range sizes {
		ns = append(ns, fmt.Sprint(n))
	}
	line := fmt.Sprintf("%s: sizes=%s paths=%d series=%d measurements=%d failed=%d rounds=%d duration=%s spread_median=%.0f%% spread_max=%.0f%% switchyard_below_kube_proxy=%s",
		cfg.resultName(), strings.Join(ns, ","), len(cfg.paths), len(figs), len(samples), failed, cfg.rounds, cfg.duration,
		100*median(spreads), 100*slices.Max(append(spreads, 0)), strings.Join(below, ","))
	if cfg.envLabel != "" {
		// Where absolute figures mean little (the VM), the trend in N
		// is the point: each path's short-connection ratio to direct.
		line += " short_tcp_ratio_direct=" + dpShortTrend(figs, cfg, sizes)
	}
	line += cfg.familyField() + cfg.envField()
	fmt.Fprintln(cfg.out, line)
}

// dpShortTrend is every proxy path's short-TCP ratio to direct per via and
// N, "MODE/VIA@N:RATIO,...", in the run's path, via and size order.
func dpShortTrend(figs map[dpKey]dpFigure, cfg dpConfig, sizes []int) string {
	var out []string
	for _, spec := range cfg.paths {
		proxy, mode, ok := strings.Cut(spec, ":")
		if !ok {
			continue // direct
		}
		for _, via := range cfg.vias {
			for _, n := range sizes {
				k := dpKey{n, mode, proxy, via, "short"}
				f, ok := figs[k]
				if !ok || f.rounds == 0 {
					continue
				}
				out = append(out, fmt.Sprintf("%s/%s@%d:%.2f", mode, via, n, ratio(f.rate, figs[dpDirect(k)].rate)))
			}
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}
