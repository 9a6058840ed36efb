package iptables

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// A small cluster in network namespaces, for the kernel traffic test:
//
//	client (192.168.77.2) --veth-- node (192.168.77.1; br0 10.244.0.1/24) --bridge-- pods 10.244.0.11..
//
// The client routes everything via the node and the node's default route
// points back at the client (like a real node's gateway), so traffic to a
// service IP with no endpoints reaches the node's FORWARD chain, where
// the REJECT rules are. Pods reach the node over a bridge; the test
// traffic is routed (client <-> pods through the node's IP stack), never
// bridged between pods, so it does not need br_netfilter.
const (
	topoNodeIP   = "192.168.77.1"
	topoClientIP = "192.168.77.2"
	topoBridgeIP = "10.244.0.1"
	echoPort     = 8080
)

type testPod struct {
	name, ns, ip string
}

type testTopology struct {
	node, client string
	pods         []testPod
}

// newTopology builds the namespaces, links and routes, and starts an echo
// server in every pod. Everything is removed when the test ends.
func newTopology(t *testing.T, pods int) *testTopology {
	tp := &testTopology{node: kerneltest.NewNetns(t, "syipt-"+"node"), client: kerneltest.NewNetns(t, "syipt-"+"client")}
	n, c := tp.node, tp.client
	for _, cmd := range [][]string{
		{"ip", "-n", n, "link", "set", "lo", "up"},
		{"ip", "-n", c, "link", "set", "lo", "up"},
		{"ip", "-n", n, "link", "add", "eth-client", "type", "veth", "peer", "name", "eth0", "netns", c},
		{"ip", "-n", n, "addr", "add", topoNodeIP + "/24", "dev", "eth-client"},
		{"ip", "-n", n, "link", "set", "eth-client", "up"},
		{"ip", "-n", c, "addr", "add", topoClientIP + "/24", "dev", "eth0"},
		{"ip", "-n", c, "link", "set", "eth0", "up"},
		{"ip", "-n", c, "route", "add", "default", "via", topoNodeIP},
		{"ip", "-n", n, "route", "add", "default", "via", topoClientIP},
		{"ip", "-n", n, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", n, "addr", "add", topoBridgeIP + "/24", "dev", "br0"},
		{"ip", "-n", n, "link", "set", "br0", "up"},
		// The kernel rate-limits ICMP errors per peer (1 s, burst 6);
		// REJECT answers are ICMP errors. This namespace is ours.
		{"ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.icmp_ratelimit=0"},
	} {
		kerneltest.Run(t, cmd...)
	}
	for i := range pods {
		tp.pods = append(tp.pods, tp.addPod(t, i))
	}
	return tp
}

func (tp *testTopology) addPod(t *testing.T, i int) testPod {
	p := testPod{name: fmt.Sprintf("pod-%d", i), ns: kerneltest.NewNetns(t, "syipt-"+"pod"), ip: fmt.Sprintf("10.244.0.%d", 11+i)}
	hostSide := fmt.Sprintf("veth-pod%d", i)
	for _, cmd := range [][]string{
		{"ip", "-n", tp.node, "link", "add", hostSide, "type", "veth", "peer", "name", "eth0", "netns", p.ns},
		{"ip", "-n", tp.node, "link", "set", hostSide, "master", "br0", "up"},
		{"ip", "-n", p.ns, "link", "set", "lo", "up"},
		{"ip", "-n", p.ns, "addr", "add", p.ip + "/24", "dev", "eth0"},
		{"ip", "-n", p.ns, "link", "set", "eth0", "up"},
		{"ip", "-n", p.ns, "route", "add", "default", "via", topoBridgeIP},
	} {
		kerneltest.Run(t, cmd...)
	}
	startEchoServer(t, p)
	return p
}

// startEchoServer listens on TCP and UDP echoPort inside the pod's
// namespace (sockets keep the namespace they were created in) and answers
// every line or datagram with "<pod name> <peer ip>".
func startEchoServer(t *testing.T, p testPod) {
	var ln net.Listener
	var pc net.PacketConn
	err := kerneltest.InNetns(p.ns, func() error {
		var err error
		if ln, err = net.Listen("tcp", fmt.Sprintf(":%d", echoPort)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", echoPort))
		return err
	})
	if err != nil {
		t.Fatalf("echo server in %s: %v", p.ns, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	answer := func(peer net.Addr) []byte {
		host, _, _ := net.SplitHostPort(peer.String())
		return []byte(p.name + " " + host + "\n")
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if _, err := bufio.NewReader(conn).ReadString('\n'); err == nil {
					_, _ = conn.Write(answer(conn.RemoteAddr()))
				}
			}()
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			_, peer, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(answer(peer), peer)
		}
	}()
}

// ioTimeout only keeps a lost packet from hanging the test; nothing is
// asserted about time.
const ioTimeout = 10 * time.Second

// ask sends one request over a new connection ("tcp" or "udp") from the
// namespace the calling thread is in, and returns the reply line.
func ask(network, addr string) (string, error) {
	conn, err := net.DialTimeout(network, addr, ioTimeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := conn.Write([]byte("hello\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// fromClient asks n times from the client namespace and returns the
// replies.
func (tp *testTopology) fromClient(network, addr string, n int) ([]string, error) {
	var out []string
	err := kerneltest.InNetns(tp.client, func() error {
		for range n {
			reply, err := ask(network, addr)
			if err != nil {
				return fmt.Errorf("%s %s: %w", network, addr, err)
			}
			out = append(out, reply)
		}
		return nil
	})
	return out, err
}

// connectFromClient dials TCP addr from the client namespace and returns
// the error (nil if it connected).
func (tp *testTopology) connectFromClient(ctx context.Context, addr string) error {
	return kerneltest.InNetns(tp.client, func() error {
		d := net.Dialer{Timeout: ioTimeout}
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
			return nil
		}
		return err
	})
}

// isRefused reports a connection refused (an ICMP port unreachable or a
// TCP reset), not a timeout.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
