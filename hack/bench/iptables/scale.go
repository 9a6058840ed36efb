package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Targets (shared/PERF-FACTS.md and the project card).
const (
	targetFullRatio = 1.2                    // full sync vs the plain-restore floor, nft
	targetPartial   = 100 * time.Millisecond // one-endpoint change, nft
	targetCPUShare  = 0.10                   // own CPU per sync wall time
	targetRSS       = 150 << 20              // RSS after the largest full sync
)

// scaleResult gathers the runs of one mode and scale.
type scaleResult struct {
	full, partial, floor []sample
	probes               []time.Duration
	rules                int
}

// measureScale runs switchyard and the floor cfg.runs times each,
// alternating so drift on the shared machine hits both alike. The floor
// restores what the first switchyard run installed.
func measureScale(ctx context.Context, cfg *config, mode string, n int, rep *report) error {
	rmode, _ := runnerMode(mode)
	st := buildState(n, cfg.endpoints)
	var res scaleResult
	var payload []byte
	name := scaleCase(mode, n, cfg.endpoints)
	for i := range cfg.runs {
		run, err := switchyardRun(ctx, rmode, st, 0, cfg.partials, i == 0)
		if err != nil {
			return err
		}
		if i == 0 {
			payload, res.rules = run.saved, ruleCount(run.saved)
		}
		floor, err := floorRun(ctx, rmode, payload)
		if err != nil {
			return err
		}
		progress("%s run %d/%d: full sync %s (CPU %s), floor %s (CPU %s), partial %s", name, i+1, cfg.runs,
			fmtDur(run.full.wall), fmtDur(run.full.cpu+run.full.childCPU), fmtDur(floor.wall), fmtDur(floor.childCPU),
			fmtDur(medianDur(walls(run.parts))))
		res.full, res.partial = append(res.full, run.full), append(res.partial, run.parts...)
		res.floor, res.probes = append(res.floor, floor), append(res.probes, run.probe)
	}
	res.addRows(rep, mode, name)
	return nil
}

func walls(ss []sample) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = s.wall
	}
	return out
}

func cpuShares(ss []sample) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = s.cpuShare()
	}
	return out
}

// breakdown splits the median sample's wall time: in iptables-restore,
// and outside it (other iptables commands plus own CPU).
func breakdown(ss []sample) string {
	s := slices.Clone(ss)
	slices.SortFunc(s, func(a, b sample) int { return int(a.wall - b.wall) })
	m := s[len(s)/2]
	return fmt.Sprintf("%s in %d restore(s), %s outside (own CPU %s)",
		fmtDur(m.restoreWall), m.restores, fmtDur(m.wall-m.restoreWall), fmtDur(m.cpu))
}

func totalCPU(ss []sample) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = s.cpu + s.childCPU
	}
	return out
}

func (r scaleResult) addRows(rep *report, mode, name string) {
	const sec = "scale"
	rep.add(sec, name, "rules installed (iptables-save -A lines)", fmt.Sprint(r.rules))
	rep.add(sec, name, "full sync: switchyard", fmtRuns(walls(r.full)))
	rep.add(sec, name, "full sync: floor (plain iptables-restore)", fmtRuns(walls(r.floor)))
	ratio := medianDur(walls(r.full)).Seconds() / medianDur(walls(r.floor)).Seconds()
	if mode == "nft" {
		rep.addTarget(sec, name, "full sync: switchyard / floor", fmt.Sprintf("%.2fx", ratio),
			fmt.Sprintf("<= %.1fx", targetFullRatio), ratio <= targetFullRatio)
	} else {
		rep.add(sec, name, "full sync: switchyard / floor", fmt.Sprintf("%.2fx", ratio))
	}
	cpuSy, cpuFloor := medianDur(totalCPU(r.full)), medianDur(totalCPU(r.floor))
	rep.add(sec, name, "full sync CPU (own + iptables children): switchyard / floor",
		fmt.Sprintf("%s / %s = %.2fx", fmtDur(cpuSy), fmtDur(cpuFloor), cpuSy.Seconds()/cpuFloor.Seconds()))
	rep.add(sec, name, "full sync: where the time goes (median run)", breakdown(r.full))
	cpu := median(cpuShares(r.full))
	rep.addTarget(sec, name, "full sync: own CPU / wall", fmtPercent(cpu), "<= 10%", cpu <= targetCPUShare)
	r.addPartialRows(rep, mode, name)
}

func (r scaleResult) addPartialRows(rep *report, mode, name string) {
	const sec = "scale"
	ws := walls(r.partial)
	slices.Sort(ws)
	p50 := medianDur(ws)
	value := fmt.Sprintf("p50 %s, p90 %s, max %s (%d syncs)", fmtDur(p50), fmtDur(ws[len(ws)*9/10]), fmtDur(ws[len(ws)-1]), len(ws))
	if mode == "nft" {
		rep.addTarget(sec, name, "one-endpoint change (partial sync)", value, "p50 <= 100 ms", p50 <= targetPartial)
	} else {
		rep.add(sec, name, "one-endpoint change (partial sync)", value)
	}
	rep.add(sec, name, "one-endpoint change: where the time goes", breakdown(r.partial))
	rep.add(sec, name, "floor of any nat change (restore of one new chain, one rule)", fmtRuns(r.probes))
	cpu := median(cpuShares(r.partial))
	rep.addTarget(sec, name, "one-endpoint change: own CPU / wall", fmtPercent(cpu), "<= 10%", cpu <= targetCPUShare)
}

// chunkSweep times the full sync at the largest nft scale once per
// ChunkRules value, to justify the default by measurement.
func chunkSweep(ctx context.Context, cfg *config, rep *report) error {
	n := cfg.largest()
	st := buildState(n, cfg.endpoints)
	name := scaleCase("nft", n, cfg.endpoints)
	rmode, _ := runnerMode("nft")
	for _, c := range cfg.chunks {
		run, err := switchyardRun(ctx, rmode, st, c, 0, false)
		if err != nil {
			return fmt.Errorf("ChunkRules=%d: %w", c, err)
		}
		full := run.full
		progress("%s ChunkRules=%d: full sync %s", name, c, fmtDur(full.wall))
		rep.add("chunk size", name, fmt.Sprintf("full sync, ChunkRules=%d", c),
			fmt.Sprintf("%s, CPU %s (%d restores, one run)", fmtDur(full.wall), fmtDur(full.cpu+full.childCPU), full.restores))
	}
	return nil
}

// measureMemory runs the memory probe at the largest scale.
func measureMemory(ctx context.Context, cfg *config, mode string, rep *report) error {
	n := cfg.largest()
	m, err := probeMemory(ctx, mode, n, cfg.endpoints)
	if err != nil {
		return err
	}
	name := scaleCase(mode, n, cfg.endpoints)
	progress("%s memory: RSS %s, peak %s", name, fmtMiB(m.RSS), fmtMiB(m.PeakRSS))
	const sec = "memory"
	rep.add(sec, name, "Go heap in use: the State alone", fmtMiB(m.StateHeap))
	rep.add(sec, name, "Go heap in use after full sync (State + backend)", fmtMiB(m.SyncHeap))
	rep.addTarget(sec, name, "RSS right after full sync (fresh process)", fmtMiB(m.RSS), "<= 150 MiB", m.RSS <= targetRSS)
	rep.add(sec, name, "peak RSS (VmHWM) during it", fmtMiB(m.PeakRSS))
	rep.addTarget(sec, name, "RSS once free pages went back to the OS", fmtMiB(m.SettledRSS), "<= 150 MiB", m.SettledRSS <= targetRSS)
	return nil
}
