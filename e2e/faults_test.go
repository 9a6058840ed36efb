//go:build e2e

package e2e

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// Knobs of the fault tests. The outage lasts the 60 s by default;
// the burst defaults to 2,000 services to keep CI short (the issue's
// figure is SWITCHYARD_FAULT_SERVICES=10000, about 10 minutes here).
const (
	outageEnv   = "SWITCHYARD_FAULT_OUTAGE"
	servicesEnv = "SWITCHYARD_FAULT_SERVICES"
)

// TestFaults injects faults into a running node and checks that the
// dataplane keeps working and heals, reporting the figures (t.Logf).
// Timings are reported, and asserted only where a bound is the contract.
func TestFaults(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"api-server-outage", testAPIServerOutage},
		{"daemon-sigkill", testDaemonKilled},
		{"rules-tampered", testRulesTampered},
		{"userspace-rules-wiped", testUserspaceWiped},
		{"userspace-daemon-sigkill", testUserspaceRestart("SIGKILL", "--userspace-restart-fallback")},
		{"userspace-daemon-sigterm", testUserspaceRestart("SIGTERM", "--userspace-restart-fallback")},
		{"userspace-daemon-sigterm-handoff", testUserspaceRestart("SIGTERM")},
		{"restore-failure", testRestoreFailure},
		{"xtables-lock", testXtablesLock},
		{"service-burst", testServiceBurst},
		{"bad-config", testBadConfig},
		{"no-rbac", testNoRBAC},
		{"exposure", testExposure},
	} {
		t.Run(c.name, c.fn)
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// setSliceEndpoints replaces the endpoints of svc's slice "<svc>-1".
func setSliceEndpoints(t *testing.T, env *framework.Env, svc *corev1.Service, pods []framework.Pod) {
	t.Helper()
	api := env.Client.DiscoveryV1().EndpointSlices(env.Namespace)
	s, err := api.Get(t.Context(), svc.Name+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Endpoints = framework.PodEndpoints(env.Topo.NodeName, pods...)
	framework.SetTriggerTime(s, time.Now())
	if _, err := api.Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitServedBy polls the loop's results until n consecutive successes
// after since came only from want; it returns when the first of them
// started. It fails the test after timeout.
func waitServedBy(t *testing.T, loop *framework.EchoLoop, since time.Time, want []string, n int, timeout time.Duration) time.Time {
	t.Helper()
	var first time.Time
	err := framework.WaitFor(timeout, func() (bool, error) {
		run := 0
		for _, r := range loop.Results() {
			if r.At.Before(since) {
				continue
			}
			if r.Err != nil || !slices.Contains(want, r.Server) {
				run = 0
				continue
			}
			if run == 0 {
				first = r.At
			}
			run++
			if run >= n {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("never %d answers in a row from only %v: %v", n, want, err)
	}
	return first
}

// nodeRun runs argv in the node namespace and returns its output.
func nodeRun(t *testing.T, env *framework.Env, argv ...string) string {
	t.Helper()
	out, err := framework.RunIn(t.Context(), env.Topo.NodeNS, argv...)
	if err != nil {
		t.Fatalf("%v in %s: %v\n%s", argv, env.Topo.NodeNS, err, out)
	}
	return out
}

// chainRules lists a chain's rules in the node namespace with the given
// iptables binary; nil if the chain does not exist.
func chainRules(ctx context.Context, env *framework.Env, bin, table, chain string) []string {
	out, err := framework.RunIn(ctx, env.Topo.NodeNS, bin, "-w", "5", "-t", table, "-S", chain)
	if err != nil {
		return nil
	}
	var rules []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			rules = append(rules, l)
		}
	}
	return rules
}

// ruleWith returns the first rule containing every one of parts.
func ruleWith(rules []string, parts ...string) (int, string) {
	for i, r := range rules {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(r, p)
		}
		if ok {
			return i, r
		}
	}
	return -1, ""
}

// jumpTarget is the chain after "-j " in a rule.
func jumpTarget(rule string) string {
	_, after, _ := strings.Cut(rule, " -j ")
	return strings.Fields(after + " ")[0]
}

// echoPorts are the ports of an EchoService's EndpointSlice.
func echoPorts() []discoveryv1.EndpointPort {
	return []discoveryv1.EndpointPort{
		framework.NewEndpointPort("tcp", corev1.ProtocolTCP, framework.EchoPort),
		framework.NewEndpointPort("udp", corev1.ProtocolUDP, framework.EchoPort),
	}
}

// logHas reports whether the daemon's log holds a line with every part.
func logHas(d *framework.Daemon, parts ...string) bool {
	b, err := os.ReadFile(d.LogPath)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + "s" }

// lastOutside returns when the last request after since that a server
// outside want answered was sent (since if none): once a change removed
// those servers, the change took effect between that request and the next.
func lastOutside(results []framework.EchoResult, since time.Time, want []string) time.Time {
	last := since
	for _, r := range results {
		if !r.At.Before(since) && r.Err == nil && !slices.Contains(want, r.Server) {
			last = r.At
		}
	}
	return last
}
