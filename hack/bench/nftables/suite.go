package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Targets of issue 16, with the daemon's default flags.
const (
	targetNewServiceP50 = 100 * time.Millisecond
	targetBurstP99      = 2 * time.Second
	targetBurstCPU      = 0.50 // of one core
)

// suiteConfig is the end-to-end latency suite: per backend, new services
// on an existing scale, and a burst of EndpointSlice updates at another.
type suiteConfig struct {
	backends              string
	newScale, newServices int
	burstScale, burst     int
	burstOver             time.Duration
	settle                time.Duration
	newGap                time.Duration
}

func addSuiteFlags() *suiteConfig {
	c := &suiteConfig{}
	flag.StringVar(&c.backends, "suite-backends", "iptables-nft iptables-legacy nftables", "backends of the suite")
	flag.IntVar(&c.newScale, "suite-new-scale", 1000, "existing services under the new ones (0 skips)")
	flag.IntVar(&c.newServices, "suite-new", 20, "new services, each Service then its EndpointSlice")
	flag.IntVar(&c.burstScale, "suite-burst-scale", 10000, "services under the burst (0 skips)")
	flag.IntVar(&c.burst, "suite-burst", 1000, "EndpointSlice updates in the burst")
	flag.DurationVar(&c.burstOver, "suite-burst-over", 10*time.Second, "span of the burst")
	flag.DurationVar(&c.settle, "suite-settle", 5*time.Second, "pause after the first sync before measuring")
	flag.DurationVar(&c.newGap, "suite-new-gap", 50*time.Millisecond, "pause after each new service is synced before the next is created")
	return c
}

// runSuite measures every backend, each case in a fresh namespace, and
// writes the rows (tab-separated: section, case, figure, value, target,
// met) for the iptables harness's table.
func runSuite(c *suiteConfig, eps int, path string) error {
	var rows []string
	add := func(kase, figure, value, target string, ok bool) {
		met := "-"
		if target != "-" {
			met = map[bool]string{true: "yes", false: "MISSED"}[ok]
		}
		rows = append(rows, strings.Join([]string{"end to end, default flags", kase, figure, value, target, met}, "\t"))
	}
	for _, be := range strings.Fields(c.backends) {
		// -settle: a node that has been up a while, not one whose first
		// full sync just spent the runner's sync budget (which then holds
		// the next sync back by up to MaxWait, 4 s).
		common := []string{"-backend=" + be, "-daemon-defaults", "-settle", c.settle.String()}
		if c.newScale > 0 {
			fmt.Fprintf(os.Stderr, "bench: %s: %d new services on %d\n", be, c.newServices, c.newScale)
			res, err := inNetns(func(ns string) (*childResult, error) {
				return runChildIn(ns, append(childArgs(c.newScale, eps, 0, c.newServices), append(common, "-new-gap", c.newGap.String())...)...)
			})
			if err != nil {
				return fmt.Errorf("%s, new services: %w", be, err)
			}
			newServiceRows(add, be, c.newScale, eps, res)
		}
		if c.burstScale > 0 {
			fmt.Fprintf(os.Stderr, "bench: %s: burst of %d updates over %v at %d services\n", be, c.burst, c.burstOver, c.burstScale)
			args := append(childArgs(c.burstScale, eps, 0, 0), append(common, "-burst", strconv.Itoa(c.burst), "-burst-over", c.burstOver.String())...)
			res, err := inNetns(func(ns string) (*childResult, error) { return runChildIn(ns, args...) })
			if err != nil {
				return fmt.Errorf("%s, burst: %w", be, err)
			}
			burstRows(add, be, c, eps, res)
		}
	}
	return os.WriteFile(path, []byte(strings.Join(rows, "\n")+"\n"), 0o644)
}

type addRow func(kase, figure, value, target string, ok bool)

func newServiceRows(add addRow, be string, n, eps int, res *childResult) {
	kase := fmt.Sprintf("%s %s svc x %d ep", be, kilo(n), eps)
	lat := pick([]*childResult{res}, true, func(c change) time.Duration { return c.Latency })
	p50 := percentile(lat, 50)
	add(kase, fmt.Sprintf("new service + slice -> synced, p50 (n=%d)", len(lat)), ms(p50), "<= 100 ms", p50 <= targetNewServiceP50)
	add(kase, "new service + slice -> synced, p99", ms(percentile(lat, 99)), "-", false)
	syncs := make([]string, len(res.NewServices))
	for i, c := range res.NewServices {
		syncs[i] = strconv.Itoa(c.Syncs)
	}
	add(kase, "syncs per new service", strings.Join(syncs, " "), "-", false)
	add(kase, "first sync (backend Sync)", fmtSeconds(res.FirstSyncBackend), "-", false)
}

func burstRows(add addRow, be string, c *suiteConfig, eps int, res *childResult) {
	b := res.Burst
	kase := fmt.Sprintf("%s %s svc x %d ep", be, kilo(c.burstScale), eps)
	what := fmt.Sprintf("burst %d slice updates / %v", b.Updates, c.burstOver)
	p99 := percentile(b.Latencies, 99)
	cpu := b.CPU.Seconds() / b.Wall.Seconds()
	add(kase, what+": syncs", strconv.Itoa(b.Syncs), "-", false)
	add(kase, what+": update -> synced p50", ms(percentile(b.Latencies, 50)), "-", false)
	add(kase, what+": update -> synced p99", ms(p99), "<= 2 s", p99 <= targetBurstP99)
	add(kase, what+": CPU, process + children", fmt.Sprintf("%.1f%% of one core over %.1f s (children %.1f%%; the process includes the fake API server)",
		100*cpu, b.Wall.Seconds(), 100*b.ChildCPU.Seconds()/b.Wall.Seconds()), "<= 50%", cpu <= targetBurstCPU)
	add(kase, what+": time in backend Sync", fmt.Sprintf("%.1f%% of wall", 100*b.SyncTime.Seconds()/b.Wall.Seconds()), "-", false)
	add(kase, "first sync (backend Sync)", fmtSeconds(res.FirstSyncBackend), "-", false)
}

func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// kilo prints 10000 as 10k.
func kilo(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}
