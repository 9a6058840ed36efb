package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	cfg, err := parseConfig(os.Args[1:], os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.memProbe != "" {
		err = runMemProbe(ctx, cfg.memProbe, cfg.endpoints, os.Stdout)
	} else {
		err = run(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		stop()
		os.Exit(1)
	}
}

// progress reports what is being measured, on stderr.
func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// run measures everything the config asks for and prints one table.
func run(ctx context.Context, cfg *config) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (it creates network namespaces)")
	}
	rep := &report{}
	for _, mode := range cfg.modes {
		for _, n := range cfg.scales {
			if err := measureScale(ctx, cfg, mode, n, rep); err != nil {
				return fmt.Errorf("%s: %w", scaleCase(mode, n, cfg.endpoints), err)
			}
		}
	}
	if cfg.e2eRows != "" {
		if err := addE2ERows(cfg.e2eRows, rep); err != nil {
			return err
		}
	}
	if len(cfg.chunks) > 0 && contains(cfg.modes, "nft") {
		if err := chunkSweep(ctx, cfg, rep); err != nil {
			return fmt.Errorf("chunk sweep: %w", err)
		}
	}
	if cfg.memory {
		for _, mode := range cfg.modes {
			if err := measureMemory(ctx, cfg, mode, rep); err != nil {
				return fmt.Errorf("memory: %w", err)
			}
		}
	}
	if cfg.goBench != "" {
		if err := addGoBench(cfg.goBench, rep); err != nil {
			return err
		}
	}
	fmt.Printf("switchyard iptables benchmark: %d CPUs (shared with other work: noisy; read ratios), medians of %d runs\n",
		runtime.NumCPU(), cfg.runs)
	return rep.print(os.Stdout)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func addGoBench(path string, rep *report) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	results, err := parseGoBench(f)
	if err != nil {
		return err
	}
	for _, g := range results {
		rep.add("go micro-benchmarks", g.pkg, g.name, g.summary())
	}
	return nil
}

// addE2ERows includes rows measured by the end-to-end suite, one per line,
// tab-separated: section, case, figure, value, target, met.
func addE2ERows(path string, rep *report) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			return fmt.Errorf("%s: want 6 tab-separated fields: %q", path, line)
		}
		rep.rows = append(rep.rows, row{section: f[0], kase: f[1], metric: f[2], value: f[3], target: f[4], met: f[5]})
	}
	return nil
}
