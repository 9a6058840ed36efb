//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// Knobs of TestSoak (`make soak`, hack/soak.sh); it is skipped unless
// SWITCHYARD_SOAK_MIN is set.
const (
	soakMinEnv       = "SWITCHYARD_SOAK_MIN"       // minutes of churn, 60
	soakServicesEnv  = "SWITCHYARD_SOAK_SERVICES"  // Services in the apiserver, 10000
	soakEndpointsEnv = "SWITCHYARD_SOAK_ENDPOINTS" // endpoints per Service, 10
	soakModeEnv      = "SWITCHYARD_SOAK_MODE"      // both proxies' mode: nftables (default) or iptables
	soakWarmupEnv    = "SWITCHYARD_SOAK_WARMUP"    // samples before it are left out of the slopes, 10m
	soakSampleEnv    = "SWITCHYARD_SOAK_SAMPLE"    // sampling period, 30s
	soakOutEnv       = "SWITCHYARD_SOAK_OUT"       // a file that also gets the tables and result lines
)

// The churn's rates (issue 43): endpoint updates, a Service created and
// one deleted, a slice split or merged, a node label changed; and the
// probe Service's extra endpoints toggled.
const (
	soakUpdateEvery = 50 * time.Millisecond // 20/s
	soakCreateEvery = 5 * time.Second
	soakSplitEvery  = time.Minute
	soakNodeEvery   = 10 * time.Minute
	soakNodeFirst   = time.Minute // the first label change, so that short runs have one
	soakProbeChurn  = 2 * time.Second
	soakProbeEvery  = 100 * time.Millisecond
	// A probe's timeout: with 2 s, probes timed out on the machine at a
	// load average of 50-100 through both proxies alike.
	soakProbeTimeout = 5 * time.Second
	soakUpdaters     = 16 // goroutines writing the endpoint updates (8 fell behind on the loaded machine)
)

// soakPods: pod0 is the probing client, pod1 and pod2 the probe Service's
// stable endpoints, pod3 and pod4 its churned ones; all answer (echo
// servers), also once out of the Service, so a probe has no reason to
// fail but the proxy (or a machine too starved to answer in time:
// soakFailureKind tells a refusal from a timeout).
const soakPods = 5

// soakProxy is one proxy under soak in its own node namespace.
type soakProxy struct {
	name    string // "switchyard", "kube-proxy"
	env     *framework.Env
	d       *framework.Daemon
	layout  framework.KernelLayout
	probe   *framework.EchoLoop
	samples []soakSample
	// running totals
	mismatches  int // samples whose kernel disagreed with the API past the bound
	unread      int // samples whose kernel could not be read
	maxLag      time.Duration
	probesSeen  int
	probeFailed int
	failKinds   map[string]int // failed probes by kind (soakFailureKind)
	firstFails  []string       // the first few failed probes: when, and the error
	servers     map[string]int
	prevHist    framework.Histogram
	exited      error
	start       time.Time // the churn's start
}

// TestSoak runs switchyard and upstream kube-proxy side by side, each in
// its own node namespace against one apiserver holding N Services × E
// endpoints, under continuous churn through the API for SWITCHYARD_SOAK_MIN
// minutes, and samples both every 30 s: memory, Go heap, goroutines, open
// fds, sync duration p99, sync failures, and the kernel's service and
// endpoint counts against the API's. A prober through a churned Service
// counts failed connections. It ends with one result line per proxy.
func TestSoak(t *testing.T) {
	minutes := envInt(t, soakMinEnv, 0)
	if minutes == 0 {
		t.Skipf("set %s (minutes) to run", soakMinEnv)
	}
	cfg := soakConfigFromEnv(t, minutes)
	proxies := soakSetup(t, cfg)
	api := newSoakAPI(t)
	churn := newSoakChurn(t, cfg, proxies)
	soakStart(t, cfg, proxies, churn)
	fmt.Fprintf(cfg.out, "\nsoak: %d services x %d endpoints, mode %s, %d min of churn, a sample every %s\n%s\n",
		cfg.services, cfg.endpoints, cfg.mode, cfg.minutes, cfg.sample, soakHeader)
	start := time.Now()
	for _, p := range proxies {
		p.start = start
	}
	stop := churn.start(start)
	// SIGINT or SIGTERM ends the run early, reported and cleaned up
	// (namespaces, processes, the seeded objects) as a full one.
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(interrupt)
	soakSampleLoop(t, cfg, proxies, api, start, interrupt)
	stop()
	for _, p := range proxies {
		p.probe.Stop()
	}
	soakReport(t, cfg, proxies, churn, time.Since(start))
}

// soakConfig is the run's knobs.
type soakConfig struct {
	minutes, services, endpoints int
	mode                         string
	warmup, sample               time.Duration
	out                          io.Writer
}

func soakConfigFromEnv(t *testing.T, minutes int) soakConfig {
	t.Helper()
	c := soakConfig{
		minutes:   minutes,
		services:  envInt(t, soakServicesEnv, 10000),
		endpoints: envInt(t, soakEndpointsEnv, 10),
		mode:      envOr(soakModeEnv, "nftables"),
		warmup:    envDuration(t, soakWarmupEnv, 10*time.Minute),
		sample:    envDuration(t, soakSampleEnv, 30*time.Second),
		out:       os.Stdout,
	}
	if c.mode != "nftables" && c.mode != "iptables" {
		t.Fatalf("%s=%q: want nftables or iptables", soakModeEnv, c.mode)
	}
	if total := time.Duration(minutes) * time.Minute; c.warmup >= total {
		c.warmup = total / 3
		t.Logf("a %d min run: the slopes leave out the first %s", minutes, c.warmup)
	}
	if f := os.Getenv(soakOutEnv); f != "" {
		w, err := os.Create(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close() })
		c.out = io.MultiWriter(os.Stdout, w)
	}
	return c
}

// soakSetup builds both proxies' topologies (same pod addresses) and the
// background Services in the first one's Kubernetes namespace.
func soakSetup(t *testing.T, cfg soakConfig) []*soakProxy {
	t.Helper()
	var proxies []*soakProxy
	for _, name := range []string{"switchyard", "kube-proxy"} {
		layout, err := framework.KernelLayoutFor(name, cfg.mode)
		if err != nil {
			t.Fatal(err)
		}
		env := framework.Setup(t, suite, framework.TopologySpec{Pods: soakPods})
		proxies = append(proxies, &soakProxy{name: name, env: env, layout: layout, servers: map[string]int{}, failKinds: map[string]int{}})
	}
	a, b := proxies[0].env.Topo.Pods, proxies[1].env.Topo.Pods
	for i := range a {
		if a[i].IP != b[i].IP {
			t.Fatalf("the topologies' pods differ: %s has %s, %s", a[i].Name, a[i].IP, b[i].IP)
		}
	}
	start := time.Now()
	createBackground(t, proxies[0].env, cfg.services, cfg.endpoints, 1)
	t.Logf("%d background services x %d endpoints in %s", cfg.services, cfg.endpoints, secs(time.Since(start)))
	return proxies
}

// soakStart starts both proxies from an empty kernel, waits for their
// first syncs and for the probe Service to answer through each, then
// starts the probers.
func soakStart(t *testing.T, cfg soakConfig, proxies []*soakProxy, churn *soakChurn) {
	t.Helper()
	start := time.Now()
	for _, p := range proxies {
		flushKernel(t, p.env)
		if p.name == "kube-proxy" {
			p.d = p.env.StartKubeProxy(t, "--proxy-mode="+cfg.mode)
		} else {
			p.d = p.env.StartDaemon(t, "--proxy-mode="+cfg.mode)
		}
	}
	addr := hostPort(churn.probeSvc.Spec.ClusterIP, 80)
	for _, p := range proxies {
		if _, ok := waitTimestamp(t, p.d, 0, scaleTimeBox); !ok {
			t.Fatalf("%s: no first sync %s after the start\n%s", p.name, secs(time.Since(start)), p.d.LogTail(20))
		}
		t.Logf("%s: first sync %s after the start", p.name, secs(time.Since(start)))
		ns := p.env.Topo.Pods[0].NS
		err := framework.WaitFor(2*time.Minute, func() (bool, error) {
			_, err := framework.Echo(t.Context(), ns, "tcp", addr)
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("%s: the probe service %s never answered from %s", p.name, addr, ns)
		}
		p.prevHist, _ = soakSyncHistogram(t.Context(), p)
	}
	for _, p := range proxies {
		p.probe = framework.StartEchoLoopTimeout(p.env.Topo.Pods[0].NS, "tcp", addr, soakProbeEvery, soakProbeTimeout)
		t.Cleanup(func() { p.probe.Stop() })
	}
}
