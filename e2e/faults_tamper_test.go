//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// tamperSyncPeriod is the daemon's --iptables-sync-period in
// testRulesTampered: every mistake must be undone within it.
const tamperSyncPeriod = 5 * time.Second

// tamperCase is one operator mistake in the node namespace.
type tamperCase struct {
	name string
	// argvs builds the commands from the current rules.
	argvs func(t *testing.T, env *framework.Env) [][]string
	// restored reports whether the damage is undone.
	restored func(env *framework.Env) bool
}

// testRulesTampered: realistic operator mistakes on a live node are undone
// within one sync period (--iptables-sync-period=5s), with traffic back.
func testRulesTampered(t *testing.T) {
	m := startMode(t, "iptables", 3, "--iptables-sync-period="+tamperSyncPeriod.String())
	pods := m.Topo.Pods
	svc := m.EchoService(t, "tamper", pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(pods), true)
	want := map[string]int{}
	for _, c := range []string{"nat/KUBE-SERVICES", "filter/KUBE-FORWARD"} {
		tbl, chain, _ := strings.Cut(c, "/")
		want[c] = len(chainRules(t.Context(), m.Env, "iptables", tbl, chain))
	}
	comment := m.Namespace + "/tamper:tcp cluster IP"
	loop := framework.StartEchoLoop(m.Topo.ClientNS, "tcp", addr, 100*time.Millisecond)
	defer loop.Stop()
	for _, tc := range tamperCases(want, comment) {
		t.Run(tc.name, func(t *testing.T) {
			waitServedBy(t, loop, time.Now(), podNames(pods), 5, converge)
			for _, argv := range tc.argvs(t, m.Env) {
				nodeRun(t, m.Env, argv...)
			}
			at := time.Now()
			if tc.restored(m.Env) {
				t.Fatalf("%s changed nothing", tc.name)
			}
			// The periodic check runs every two thirds of the period
			// (proxier.CheckInterval), so the repair lands within it.
			err := framework.WaitFor(tamperSyncPeriod, func() (bool, error) { return tc.restored(m.Env), nil })
			restoredAt := time.Now()
			if err != nil {
				t.Errorf("not restored within the sync period (%v): %v", tamperSyncPeriod, err)
				return
			}
			back := waitServedBy(t, loop, at, podNames(pods), 3, converge)
			sum := framework.Summarize(loop.Results(), at)
			t.Logf("%s: rules restored after %s, traffic back after %s (%d of %d requests failed meanwhile)",
				tc.name, secs(restoredAt.Sub(at)), secs(max(0, back.Sub(at))), sum.Failed, sum.Total)
		})
	}
}

func tamperCases(want map[string]int, comment string) []tamperCase {
	natBack := func(env *framework.Env) bool {
		return countIs(env, "nat", "KUBE-SERVICES", want["nat/KUBE-SERVICES"])
	}
	ipt := func(args ...string) []string { return append([]string{"iptables", "-w", "5"}, args...) }
	return []tamperCase{
		{"iptables -t nat -F KUBE-SERVICES", func(*testing.T, *framework.Env) [][]string {
			return [][]string{ipt("-t", "nat", "-F", "KUBE-SERVICES")}
		}, natBack},
		{"a service's rule and KUBE-SVC chain deleted", func(t *testing.T, env *framework.Env) [][]string {
			i, rule := ruleWith(chainRules(t.Context(), env, "iptables", "nat", "KUBE-SERVICES"), comment)
			if i < 0 {
				t.Fatalf("no KUBE-SERVICES rule for %q", comment)
			}
			svcChain := jumpTarget(rule)
			return [][]string{ipt("-t", "nat", "-D", "KUBE-SERVICES", strconv.Itoa(i+1)),
				ipt("-t", "nat", "-F", svcChain), ipt("-t", "nat", "-X", svcChain)}
		}, natBack},
		{"iptables -t nat -F", func(*testing.T, *framework.Env) [][]string {
			return [][]string{ipt("-t", "nat", "-F")}
		}, natBack},
		{"iptables -t nat -F; iptables -t nat -X", func(*testing.T, *framework.Env) [][]string {
			return [][]string{ipt("-t", "nat", "-F"), ipt("-t", "nat", "-X")}
		}, natBack},
		{"iptables -F (filter)", func(*testing.T, *framework.Env) [][]string {
			return [][]string{ipt("-F")}
		}, func(env *framework.Env) bool {
			_, jump := ruleWith(chainRules(context.Background(), env, "iptables", "filter", "FORWARD"), "-j KUBE-FORWARD")
			return jump != "" && countIs(env, "filter", "KUBE-FORWARD", want["filter/KUBE-FORWARD"])
		}},
		{"iptables -t mangle -F; iptables -t mangle -X", func(*testing.T, *framework.Env) [][]string {
			return [][]string{ipt("-t", "mangle", "-F"), ipt("-t", "mangle", "-X")}
		}, func(env *framework.Env) bool {
			_, err := framework.RunIn(context.Background(), env.Topo.NodeNS, "iptables", "-w", "5", "-t", "mangle", "-S", "KUBE-PROXY-CANARY")
			return err == nil
		}},
	}
}

func countIs(env *framework.Env, table, chain string, n int) bool {
	return len(chainRules(context.Background(), env, "iptables", table, chain)) == n
}
