package userspace

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelUserspaceRepair: `iptables -F` and `-X` of nat, mangle and
// filter in the node namespace stop every service; the next periodic sync
// puts the rules back, services answer on every path again, and a
// connection established before the wipe completes on its pod.
func TestKernelUserspaceRepair(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{runner.ModeNFT, runner.ModeLegacy} {
		t.Run(mode, func(t *testing.T) { kernelRepair(t, mode) })
	}
}

func kernelRepair(t *testing.T, mode string) {
	tp := newTopology(t, 3)
	tp.startPodServers(t)
	b := tp.newKernelBackend(t, mode)
	st := kernelState(0, 1, 2)
	kernelSync(t, b, st)
	cip := netip.MustParseAddrPort("10.96.0.10:80")
	held := tp.holdConnection(t, cip)
	tp.wipeTables(t, mode)
	if c, err := dialQuickly(tp.clientSocks, cip); err == nil {
		c.Close()
		t.Fatalf("the cluster IP still answers after the wipe")
	}
	res, err := b.Sync(context.Background(), st, &proxier.Diff{Verify: true})
	if err != nil {
		t.Fatalf("periodic sync: %v", err)
	}
	if !res.Full {
		t.Errorf("the periodic sync after the wipe did not rewrite the rules")
	}
	for _, p := range tp.paths("10.96.0.10", 80, 30080) {
		if answer, err := nsRequest(p.via, p.addr, "hi"); err != nil || from(answer) == "" {
			t.Errorf("%s after the repair: %q, %v", p.what, answer, err)
		}
	}
	if _, err := nsUDPExchange(tp.clientSocks, netip.MustParseAddrPort("10.96.0.53:53"), "q"); err != nil {
		t.Errorf("UDP cluster IP after the repair: %v", err)
	}
	held.finish(t)
}

// heldConn is a client connection through a proxy socket that reached
// its pod, which answers once the client half-closes.
type heldConn struct {
	conn *net.TCPConn
	pod  string
}

// holdConnection connects from the client namespace to addr, sends
// "held" and waits until a pod accepted the relayed connection.
func (tp *topology) holdConnection(t *testing.T, addr netip.AddrPort) heldConn {
	t.Helper()
	before := tp.serverCounts()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tp.clientSocks.DialTCP(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	pod := ""
	eventually(t, "the held connection to reach a pod", func() bool {
		for i, n := range tp.serverCounts() {
			if n > before[i] {
				pod = podName(i)
			}
		}
		return pod != ""
	})
	return heldConn{conn: c, pod: pod}
}

// finish half-closes and checks the pod's whole answer.
func (h heldConn) finish(t *testing.T) {
	t.Helper()
	if err := h.conn.CloseWrite(); err != nil {
		t.Fatalf("held connection: %v", err)
	}
	h.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if answer, err := io.ReadAll(h.conn); err != nil || string(answer) != h.pod+":held" {
		t.Errorf("connection from before the wipe: %q, %v; want %q", answer, err, h.pod+":held")
	}
}

// wipeTables runs an operator's `iptables -F; iptables -X` on nat,
// mangle and filter in the node namespace, with the mode's binary.
func (tp *topology) wipeTables(t *testing.T, mode string) {
	t.Helper()
	bin := "iptables-nft"
	if mode == runner.ModeLegacy {
		bin = "iptables-legacy"
	}
	wait := strconv.Itoa(kernelLockWait)
	for _, table := range []string{"nat", "mangle", "filter"} {
		for _, op := range []string{"-F", "-X"} {
			kerneltest.Run(t, "ip", "netns", "exec", tp.node, bin, "-w", wait, "-t", table, op)
		}
	}
}

// dialQuickly connects through s, giving up after a second.
func dialQuickly(s Sockets, addr netip.AddrPort) (*net.TCPConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return s.DialTCP(ctx, addr)
}
