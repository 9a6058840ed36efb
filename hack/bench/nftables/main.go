package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

func main() {
	child := flag.Bool("child", false, "measure in this process (run inside a namespace)")
	scales := flag.String("scales", "1000 10000", "service counts")
	eps := flag.Int("endpoints", 10, "endpoints per service")
	runs := flag.Int("runs", 3, "runs per scale, each in a fresh namespace")
	changes := flag.Int("changes", 50, "one-endpoint changes per run")
	newSvcs := flag.Int("new-services", 10, "new services per run")
	backend := flag.String("backend", backendNFTables, "with -child: nftables, iptables-nft, iptables-legacy or null (program nothing: the RSS baseline)")
	defaults := flag.Bool("daemon-defaults", false, "with -child: the daemon's default sync periods (else no periodic sync)")
	burst := flag.Int("burst", 0, "with -child: EndpointSlice updates in a burst after the rest")
	burstOver := flag.Duration("burst-over", 10*time.Second, "with -child: the span of the burst")
	settle := flag.Duration("settle", 0, "with -child: pause after the first sync before measuring")
	gap := flag.Duration("new-gap", 50*time.Millisecond, "with -child: pause after each new service is synced")
	settled := flag.Duration("settled", 0, "with -child: pause after the changes, then read the settled RSS (0: not read)")
	memory := flag.Bool("memory", false, "measure -backend's memory (first sync, VmHWM, RSS after it, settled RSS after the changes and -settled) at each scale, -runs times, each in a fresh namespace")
	rows := flag.String("rows", "", "run the end-to-end latency suite (-suite-*) and write its table rows here")
	suite := addSuiteFlags()
	flag.Parse()
	if *child {
		n, _ := strconv.Atoi(*scales)
		res, err := runChild(childOpts{n: n, eps: *eps, changes: *changes, newServices: *newSvcs,
			backend: *backend, daemonDefaults: *defaults, burst: *burst, burstOver: *burstOver, settle: *settle, settled: *settled, gap: *gap})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: needs root (network namespaces)")
		os.Exit(1)
	}
	if *rows != "" {
		if err := runSuite(suite, *eps, *rows); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	for _, s := range strings.Fields(*scales) {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: bad scale", s)
			os.Exit(2)
		}
		if *memory {
			err = memoryRuns(*backend, n, *eps, *runs, append(childArgs(n, *eps, *changes, *newSvcs), "-settled", settled.String()))
		} else {
			err = scale(n, *eps, *runs, *changes, *newSvcs)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

// scale measures one scale: the runs, then the floor, then prints.
func scale(n, eps, runs, changes, newSvcs int) error {
	var results []*childResult
	for r := 0; r < runs; r++ {
		res, err := inNetns(func(ns string) (*childResult, error) { return runChildIn(ns, childArgs(n, eps, changes, newSvcs)...) })
		if err != nil {
			return fmt.Errorf("%d services, run %d: %w", n, r+1, err)
		}
		results = append(results, res)
	}
	floors, err := floor(n, eps, runs)
	if err != nil {
		return fmt.Errorf("%d services, floor: %w", n, err)
	}
	base, err := inNetns(func(ns string) (*childResult, error) {
		return runChildIn(ns, append(childArgs(n, eps, 0, 0), "-backend=null")...)
	})
	if err != nil {
		return fmt.Errorf("%d services, baseline: %w", n, err)
	}
	report(n, eps, results, floors, base.RSSAfterFirst)
	return nil
}

func childArgs(n, eps, changes, newSvcs int) []string {
	return []string{"-scales", strconv.Itoa(n), "-endpoints", strconv.Itoa(eps),
		"-changes", strconv.Itoa(changes), "-new-services", strconv.Itoa(newSvcs)}
}

// runChildIn runs this binary with -child and args in namespace ns.
func runChildIn(ns string, args ...string) (*childResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, self, "-child"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var res childResult
	return &res, json.Unmarshal(out, &res)
}

// inNetns runs fn with a fresh namespace and deletes it afterwards.
func inNetns[T any](fn func(ns string) (T, error)) (T, error) {
	var zero T
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "nftbench-" + hex.EncodeToString(b[:])
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return zero, fmt.Errorf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return zero, fmt.Errorf("lo up: %v: %s", err, out)
	}
	return fn(ns)
}

// floor loads the same ruleset with `nft -f`, as text dumped by the fake
// after the same render, in fresh namespaces.
func floor(n, eps, runs int) ([]time.Duration, error) {
	fake := nftablestest.NewFake()
	be, err := nftables.New(nftables.Config{LocalDetector: proxier.DetectByClusterCIDRs(mustPrefixes(podCIDR)...), Conn: fake})
	if err != nil {
		return nil, err
	}
	if _, err := be.Sync(context.Background(), state(n, eps), &proxier.Diff{Full: true}); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nftbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ruleset.nft")
	if err := os.WriteFile(path, []byte(fake.Dump(ruleset.IPv4, nftables.TableName)), 0o644); err != nil {
		return nil, err
	}
	var out []time.Duration
	for r := 0; r < runs; r++ {
		d, err := inNetns(func(ns string) (time.Duration, error) {
			start := time.Now()
			if o, err := exec.Command("ip", "netns", "exec", ns, "nft", "-f", path).CombinedOutput(); err != nil {
				return 0, fmt.Errorf("nft -f: %v: %s", err, firstLines(string(o), 5))
			}
			d := time.Since(start)
			if r == 0 {
				cliElementCost(ns)
			}
			return d, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// cliElementCost times what a library running the nft binary (as
// sigs.k8s.io/knftables does) pays for the smallest change: one element
// added in one `nft -f -` transaction, on the loaded table.
func cliElementCost(ns string) {
	var ds []time.Duration
	for i := 0; i < 5; i++ {
		cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(fmt.Sprintf("add element ip %s hairpin-endpoints { 10.250.0.%d . 10.250.0.%d }\n", nftables.TableName, i+1, i+1))
		start := time.Now()
		if o, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: nft add element: %v: %s\n", err, o)
			return
		}
		ds = append(ds, time.Since(start))
	}
	fmt.Fprintf(os.Stderr, "bench: one element through the nft binary: median %s of %v\n", ms(median(ds)), ds)
	cliCost = median(ds)
}

// cliCost is the last cliElementCost median, for the report.
var cliCost time.Duration

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// percentile is the nearest-rank percentile.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p/100*float64(len(s)) + 0.5)
	return s[min(max(i-1, 0), len(s)-1)]
}
