//go:build e2e

package e2e

import (
	"bufio"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// vanishGrace is the daemon's --vanished-endpoint-grace-period here.
const vanishGrace = 2 * time.Second

// TestVanishedEndpointReset: with --reset-vanished-endpoint-connections,
// a client holding a connection through a ClusterIP to a pod whose
// network went away (its veth deleted, as when its node dies) gets
// ECONNRESET once the pod has left the EndpointSlices for the grace
// period, in every mode (ipvs in the VM) and both families. Without the flag it
// would hang until its own timeouts (conntrack's kernel test shows the
// silence).
func TestVanishedEndpointReset(t *testing.T) {
	for _, mode := range e2eModes() {
		t.Run(mode, func(t *testing.T) {
			m := startModeShape(t, mode, framework.ShapeDual, 2,
				"--reset-vanished-endpoint-connections", "--vanished-endpoint-grace-period="+vanishGrace.String())
			testVanishedEndpointReset(t, m)
		})
	}
}

func testVanishedEndpointReset(t *testing.T, m *modeEnv) {
	dead, alive := m.Topo.Pods[0], m.Topo.Pods[1]
	svc := m.EchoService(t, "vanish", dead)
	conns := map[string]net.Conn{}
	for _, f := range m.views() {
		addr := hostPort(f.clusterIP(t, svc), 80)
		waitServed(t, f.Topo.ClientNS, "tcp", addr, []string{dead.Name}, true)
		c, err := framework.DialContextIn(t.Context(), f.Topo.ClientNS, "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if name, err := exchangeOnce(c, 3*time.Second); err != nil || name != dead.Name {
			t.Fatalf("%s: first exchange: %q, %v", f.Family, name, err)
		}
		conns[string(f.Family)] = c
	}
	if _, err := framework.RunIn(t.Context(), m.Topo.NodeNS, "ip", "link", "del", "veth-pod0"); err != nil {
		t.Fatal(err)
	}
	for _, f := range m.views() {
		updateSliceEndpoints(t, m, svc, f.Family, alive)
	}
	gone := time.Now()
	time.Sleep(vanishGrace + time.Second)
	for fam, c := range conns {
		sent := time.Now()
		_, err := exchangeOnce(c, 10*time.Second)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("%s: a request %v after the endpoint left: %v, want ECONNRESET\n%s",
				fam, sent.Sub(gone).Round(time.Millisecond), err, m.daemon.LogTail(30))
			continue
		}
		t.Logf("%s: ECONNRESET %v after the request, %v after the endpoint left", fam,
			time.Since(sent).Round(time.Millisecond), time.Since(gone).Round(time.Millisecond))
	}
}

// exchangeOnce sends one echo request on c and returns the answering
// server's name.
func exchangeOnce(c net.Conn, within time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(within)); err != nil {
		return "", err
	}
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	r, err := framework.ParseEchoReply(line)
	return r.Name, err
}
