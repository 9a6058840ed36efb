//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// testUserspaceWiped: in userspace mode, an operator's `iptables -F` and
// `-X` of nat, mangle and filter stop every service (the proxy sockets
// keep listening but nothing leads to them). The next periodic sync, within
// one --iptables-sync-period, puts the portal rules back; a connection
// established before the wipe keeps working throughout.
func testUserspaceWiped(t *testing.T) {
	m := startMode(t, "userspace", 3, "--iptables-sync-period="+tamperSyncPeriod.String())
	pods := m.Topo.Pods
	svc := m.EchoService(t, "wiped", pods...)
	addr := hostPort(svc.Spec.ClusterIP, 80)
	waitServed(t, m.Topo.ClientNS, "tcp", addr, podNames(pods), true)
	loop := framework.StartEchoLoop(m.Topo.ClientNS, "tcp", addr, 100*time.Millisecond)
	defer loop.Stop()
	ipt := func(args ...string) []string { return append([]string{"iptables", "-w", "5"}, args...) }
	for _, tc := range []struct {
		name  string
		argvs [][]string
	}{
		{"iptables -t nat -F; iptables -t mangle -F; iptables -F", [][]string{
			ipt("-t", "nat", "-F"), ipt("-t", "mangle", "-F"), ipt("-F")}},
		{"then -X as well", [][]string{
			ipt("-t", "nat", "-F"), ipt("-t", "nat", "-X"), ipt("-t", "mangle", "-F"), ipt("-t", "mangle", "-X"),
			ipt("-F"), ipt("-X")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitServedBy(t, loop, time.Now(), podNames(pods), 5, converge)
			held := holdEcho(t, m.Topo.ClientNS, addr)
			for _, argv := range tc.argvs {
				nodeRun(t, m.Env, argv...)
			}
			at := time.Now()
			if portalsInPlace(m.Env) {
				t.Fatalf("%s left the portal rules in place", tc.name)
			}
			err := framework.WaitFor(tamperSyncPeriod+3*time.Second, func() (bool, error) { return portalsInPlace(m.Env), nil })
			restoredAt := time.Now()
			if err != nil {
				t.Fatalf("portal rules not restored within the sync period (%v) + 3 s: %v", tamperSyncPeriod, err)
			}
			back := waitServedBy(t, loop, at, podNames(pods), 3, converge)
			sum := framework.Summarize(loop.Results(), at)
			t.Logf("%s: rules restored after %s, traffic back after %s (%d of %d requests failed meanwhile), sync period %v",
				tc.name, secs(restoredAt.Sub(at)), secs(max(0, back.Sub(at))), sum.Failed, sum.Total, tamperSyncPeriod)
			held.check(t)
			if !logHas(m.daemon, "Restored userspace proxy rules changed outside switchyard") {
				t.Errorf("the daemon did not log the repair:\n%s", m.daemon.LogTail(20))
			}
		})
	}
	repairs, err := m.daemon.MetricValue(t.Context(), "switchyard_userspace_rules_repaired_total", map[string]string{"family": "ipv4"})
	if err != nil || repairs < 2 {
		t.Errorf("switchyard_userspace_rules_repaired_total{family=ipv4} = %v (%v), want >= 2", repairs, err)
	}
}

// portalsInPlace: the nat chains hold the service's portal rules and the
// built-in chains jump to them (the filter chain holds nothing while the
// service has endpoints, so only its jumps say it is back).
func portalsInPlace(env *framework.Env) bool {
	jumps := []struct{ table, from, to string }{
		{"nat", "PREROUTING", "KUBE-PORTALS-CONTAINER"}, {"nat", "OUTPUT", "KUBE-PORTALS-HOST"},
		{"filter", "INPUT", "KUBE-PORTALS-FILTER"}, {"filter", "OUTPUT", "KUBE-PORTALS-FILTER"},
	}
	for _, j := range jumps {
		if i, _ := ruleWith(chainRules(context.Background(), env, "iptables", j.table, j.from), "-j "+j.to); i < 0 {
			return false
		}
	}
	return len(chainRules(context.Background(), env, "iptables", "nat", "KUBE-PORTALS-CONTAINER")) > 0 &&
		len(chainRules(context.Background(), env, "iptables", "nat", "KUBE-PORTALS-HOST")) > 0
}

// heldEcho is one TCP connection through the proxy, answered once before
// the wipe.
type heldEcho struct {
	conn   net.Conn
	r      *bufio.Reader
	server string
}

// holdEcho opens a connection from ns to addr and has it answered once.
func holdEcho(t *testing.T, ns, addr string) *heldEcho {
	t.Helper()
	conn, err := framework.DialContextIn(t.Context(), ns, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	h := &heldEcho{conn: conn, r: bufio.NewReader(conn)}
	h.server = h.ask(t)
	return h
}

func (h *heldEcho) ask(t *testing.T) string {
	t.Helper()
	h.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := h.conn.Write([]byte("hello\n")); err != nil {
		t.Fatalf("held connection: %v", err)
	}
	line, err := h.r.ReadString('\n')
	if err != nil {
		t.Fatalf("held connection: %v", err)
	}
	reply, err := framework.ParseEchoReply(line)
	if err != nil {
		t.Fatal(err)
	}
	return reply.Name
}

// check: the connection still answers, from the same pod.
func (h *heldEcho) check(t *testing.T) {
	t.Helper()
	if got := h.ask(t); got != h.server {
		t.Errorf("held connection answered by %s, then by %s", h.server, got)
	}
}
