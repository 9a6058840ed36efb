package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// sample is one measured sync.
type sample struct {
	wall time.Duration
	// cpu is this process's user+system CPU (all threads) during the
	// sync: render, diff, payload building and the Go side of exec. The
	// iptables children are not in RUSAGE_SELF; childCPU is theirs
	// (RUSAGE_CHILDREN: iptables-restore, iptables, iptables-save). CPU
	// figures hold up better than wall time on a busy shared machine.
	cpu, childCPU time.Duration
	// restores and restoreWall: iptables-restore runs and the wall time
	// spent waiting for them; the rest of wall is other iptables
	// commands (jumps, canary checks) and own CPU.
	restores    int
	restoreWall time.Duration
}

// cpuShare is own CPU as a fraction of wall time.
func (s sample) cpuShare() float64 { return s.cpu.Seconds() / s.wall.Seconds() }

// countingRunner times the restores the backend runs. It embeds the
// concrete runner, so every other method the backend may look for
// (optional interfaces included) is the real runner's.
type countingRunner struct {
	*runner.Runner
	restores    int
	restoreWall time.Duration
}

func (c *countingRunner) Restore(ctx context.Context, fam runner.Family, data []byte) error {
	start := time.Now()
	err := c.Runner.Restore(ctx, fam, data)
	c.restoreWall += time.Since(start)
	c.restores++
	return err
}

func (c *countingRunner) RestoreFrom(ctx context.Context, fam runner.Family, payload io.WriterTo) error {
	start := time.Now()
	err := c.Runner.RestoreFrom(ctx, fam, payload)
	c.restoreWall += time.Since(start)
	c.restores++
	return err
}

// rusageCPU is user+system CPU of who: syscall.RUSAGE_SELF or
// syscall.RUSAGE_CHILDREN (terminated, waited-for children).
func rusageCPU(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure times fn, after a GC so earlier garbage is not charged to it.
func measure(cr *countingRunner, fn func() error) (sample, error) {
	runtime.GC()
	r0, rw0 := cr.restores, cr.restoreWall
	cpu0, child0, t0 := rusageCPU(syscall.RUSAGE_SELF), rusageCPU(syscall.RUSAGE_CHILDREN), time.Now()
	err := fn()
	return sample{wall: time.Since(t0), cpu: rusageCPU(syscall.RUSAGE_SELF) - cpu0,
		childCPU: rusageCPU(syscall.RUSAGE_CHILDREN) - child0,
		restores: cr.restores - r0, restoreWall: cr.restoreWall - rw0}, err
}

// lockWaitSeconds bounds the wait for the xtables lock, which every
// namespace shares: another user's legacy iptables run holds it.
const lockWaitSeconds = 120

// backendConfig is the backend configuration every run uses.
func backendConfig(r runner.Interface, chunkRules int) iptables.Config {
	return iptables.Config{
		Families:      []v1.IPFamily{v1.IPv4Protocol},
		LocalDetector: proxier.DetectByClusterCIDRs(netip.MustParsePrefix("10.244.0.0/16")),
		Runner:        r,
		ChunkRules:    chunkRules,
	}
}

// runResult is one switchyard run.
type runResult struct {
	full  sample
	parts []sample
	// saved is iptables-save of every table after the full sync, when
	// asked for: the rules switchyard installed, for the floor.
	saved []byte
	// probe is the floor of any change to the full nat table: one
	// restore adding a new chain with one rule (after the partials).
	probe time.Duration
}

// switchyardRun is one run in a fresh namespace: a first full sync of st,
// then partials one-endpoint changes spread over the services.
func switchyardRun(ctx context.Context, mode string, st *proxier.State, chunkRules, partials int, save bool) (res runResult, err error) {
	ns, del, err := newNetns(mode)
	if err != nil {
		return res, err
	}
	defer func() {
		if derr := del(); derr != nil && err == nil {
			err = derr
		}
	}()
	r, err := runner.New(runner.Options{Mode: mode, Netns: ns, WaitSeconds: lockWaitSeconds})
	if err != nil {
		return res, err
	}
	cr := &countingRunner{Runner: r}
	be, err := iptables.New(backendConfig(cr, chunkRules))
	if err != nil {
		return res, err
	}
	res.full, err = measure(cr, func() error { return syncOnce(ctx, be, st, &proxier.Diff{Full: true}, true) })
	if err == nil && save {
		res.saved, err = saveTables(ctx, r)
	}
	if err != nil {
		return res, err
	}
	n := len(st.Services)
	for k := range partials {
		next, diff := changeOneEndpoint(st, (k*n/partials+n/(2*partials))%n, k+1)
		s, err := measure(cr, func() error { return syncOnce(ctx, be, next, diff, false) })
		if err != nil {
			return res, err
		}
		res.parts, st = append(res.parts, s), next
	}
	if partials > 0 {
		res.probe, err = probeChange(ctx, r)
	}
	return res, err
}

// probeChange times the smallest change to the nat table, a new chain
// with one rule (then removes it): what any tool pays per sync at this
// table size. On nf_tables the kernel validates every chain reachable
// from the base chains at each commit that adds a rule.
func probeChange(ctx context.Context, r runner.Interface) (time.Duration, error) {
	add := []byte("*nat\n:SYBENCH-PROBE - [0:0]\n-A SYBENCH-PROBE -j RETURN\nCOMMIT\n")
	start := time.Now()
	if err := r.Restore(ctx, runner.IPv4, add); err != nil {
		return 0, fmt.Errorf("probe change: %w", err)
	}
	took := time.Since(start)
	if err := r.Restore(ctx, runner.IPv4, []byte("*nat\n:SYBENCH-PROBE - [0:0]\n-X SYBENCH-PROBE\nCOMMIT\n")); err != nil {
		return 0, fmt.Errorf("probe change cleanup: %w", err)
	}
	return took, nil
}

// saveTables is iptables-save of the tables the backend writes.
func saveTables(ctx context.Context, r runner.Interface) ([]byte, error) {
	var out []byte
	for _, t := range []string{"mangle", "filter", "nat"} {
		data, err := r.SaveTable(ctx, runner.IPv4, t)
		if err != nil {
			return nil, err
		}
		out = append(out, data...)
	}
	return out, nil
}

// syncOnce runs one Sync and checks it was the kind of sync expected.
func syncOnce(ctx context.Context, be *iptables.Backend, st *proxier.State, diff *proxier.Diff, wantFull bool) error {
	res, err := be.Sync(ctx, st, diff)
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if res.Full != wantFull {
		return fmt.Errorf("sync: full=%v, want %v", res.Full, wantFull)
	}
	return nil
}
