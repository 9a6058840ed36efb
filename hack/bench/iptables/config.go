package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// config is what one invocation measures.
type config struct {
	scales    []int
	runs      int
	modes     []string // "nft", "legacy"
	endpoints int
	partials  int   // one-endpoint changes per run
	chunks    []int // ChunkRules values of the sweep; empty skips it
	memory    bool
	goBench   string // `go test -bench` output to include; "" for none
	e2eRows   string // rows of hack/bench/nftables -rows to include; "" for none
	memProbe  string // hidden: "mode:services" runs the memory probe child
}

// parseConfig reads the flags, each defaulting to its BENCH_* variable.
// lookupEnv is os.LookupEnv: a variable set to "" (BENCH_CHUNKS=) counts.
func parseConfig(args []string, lookupEnv func(string) (string, bool)) (*config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	env := func(name, def string) string {
		if v, ok := lookupEnv(name); ok {
			return v
		}
		return def
	}
	scales := fs.String("scales", env("BENCH_SCALES", "1000 10000"), "service counts")
	runs := fs.String("runs", env("BENCH_RUNS", "3"), "runs per figure (median)")
	modes := fs.String("modes", env("BENCH_MODES", "nft legacy"), "iptables backends")
	eps := fs.String("endpoints", env("BENCH_ENDPOINTS", "10"), "endpoints per service")
	partials := fs.String("partials", env("BENCH_PARTIALS", "5"), "one-endpoint changes per run")
	chunks := fs.String("chunks", env("BENCH_CHUNKS", "1000 4000 10000 20000"), "ChunkRules sweep at the largest nft scale")
	memory := fs.String("memory", env("BENCH_MEMORY", "1"), "measure heap/RSS after a full sync at the largest scale")
	c := &config{}
	fs.StringVar(&c.goBench, "gobench", "", "file with `go test -bench` output to include in the table")
	fs.StringVar(&c.e2eRows, "e2e", "", "file with the end-to-end suite's rows (hack/bench/nftables -rows) to include after the scale rows")
	fs.StringVar(&c.memProbe, "memprobe", "", "internal: run the memory probe (mode:services)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	parse := func(s, what string) int {
		n, e := strconv.Atoi(strings.TrimSpace(s))
		if e != nil || n < 1 {
			err = fmt.Errorf("bench: %s %q: want a positive number", what, s)
		}
		return n
	}
	c.runs, c.endpoints, c.partials = parse(*runs, "runs"), parse(*eps, "endpoints"), parse(*partials, "partials")
	for _, f := range strings.Fields(*scales) {
		c.scales = append(c.scales, parse(f, "scale"))
	}
	for _, f := range strings.Fields(*chunks) {
		c.chunks = append(c.chunks, parse(f, "chunk size"))
	}
	c.memory = strings.TrimSpace(*memory) != "0"
	c.modes = strings.Fields(*modes)
	if err != nil {
		return nil, err
	}
	return c, c.validate()
}

func (c *config) validate() error {
	if len(c.scales) == 0 || len(c.modes) == 0 {
		return fmt.Errorf("bench: no scales or no modes")
	}
	for _, m := range c.modes {
		if _, err := runnerMode(m); err != nil {
			return err
		}
	}
	return nil
}

// largest is the biggest scale measured.
func (c *config) largest() int {
	n := 0
	for _, s := range c.scales {
		n = max(n, s)
	}
	return n
}

// runnerMode maps "nft"/"legacy" to the runner's mode.
func runnerMode(m string) (string, error) {
	switch m {
	case "nft":
		return runner.ModeNFT, nil
	case "legacy":
		return runner.ModeLegacy, nil
	}
	return "", fmt.Errorf("bench: unknown mode %q (want nft or legacy)", m)
}
