package nftables_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// Addresses of the traffic topology: a node namespace with a bridge for
// the pods (10.244.0.0/24) and a link to an outside client
// (192.168.77.0/24). The node forwards between them.
const (
	bridgeIP  = "10.244.0.1"
	nodeIP    = "192.168.77.1"
	clientIP  = "192.168.77.2"
	echoPort  = 8080
	podPrefix = "10.244.0."
)

type trafficTopo struct {
	node, client string
	pods         []string // namespace per pod; pod i has IP podIP(i)
}

func podIP(i int) string { return fmt.Sprintf("%s%d", podPrefix, 10+i) }

func run(t *testing.T, args ...string) { t.Helper(); kerneltest.Run(t, args...) }

// newTrafficTopo builds the namespaces and links, and starts an echo
// server in every pod that answers "<pod> <peer address>".
func newTrafficTopo(t *testing.T, pods int) *trafficTopo {
	t.Helper()
	tp := &trafficTopo{node: kerneltest.NewNetns(t, "nftnode"), client: kerneltest.NewNetns(t, "nftcli")}
	n := tp.node
	run(t, "ip", "-n", n, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", n, "addr", "add", bridgeIP+"/24", "dev", "br0")
	run(t, "ip", "-n", n, "link", "set", "br0", "up")
	run(t, "ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	run(t, "ip", "-n", n, "link", "add", "tocli", "type", "veth", "peer", "name", "eth0", "netns", tp.client)
	run(t, "ip", "-n", n, "addr", "add", nodeIP+"/24", "dev", "tocli")
	run(t, "ip", "-n", n, "link", "set", "tocli", "up")
	run(t, "ip", "-n", tp.client, "addr", "add", clientIP+"/24", "dev", "eth0")
	run(t, "ip", "-n", tp.client, "link", "set", "eth0", "up")
	run(t, "ip", "-n", tp.client, "route", "add", "default", "via", nodeIP)
	for i := 0; i < pods; i++ {
		p := kerneltest.NewNetns(t, fmt.Sprintf("nftpod%d", i))
		link := fmt.Sprintf("vp%d", i)
		run(t, "ip", "-n", n, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", p)
		run(t, "ip", "-n", n, "link", "set", link, "master", "br0", "up")
		// As kubelet's hairpin-veth: with br_netfilter a pod's packet
		// DNATed back to itself leaves through the port it came in by.
		run(t, "ip", "-n", n, "link", "set", link, "type", "bridge_slave", "hairpin", "on")
		run(t, "ip", "-n", p, "addr", "add", podIP(i)+"/24", "dev", "eth0")
		run(t, "ip", "-n", p, "link", "set", "eth0", "up")
		run(t, "ip", "-n", p, "route", "add", "default", "via", bridgeIP)
		startEcho(t, p, fmt.Sprintf("pod%d", i))
		tp.pods = append(tp.pods, p)
	}
	return tp
}

// startEcho listens in ns and answers each connection with its name and
// the address the connection came from.
func startEcho(t *testing.T, ns, name string) {
	t.Helper()
	var ln net.Listener
	err := kerneltest.InNetns(ns, func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", echoPort))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s %s\n", name, host)
			c.Close()
		}
	}()
}

// request opens one TCP connection from ns to addr and returns the
// answer ("pod0 192.168.77.2").
func request(ns, addr string) (string, error) {
	var conn net.Conn
	err := kerneltest.InNetns(ns, func() (err error) {
		d := net.Dialer{Timeout: 2 * time.Second}
		conn, err = d.DialContext(context.Background(), "tcp", addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// spread sends n requests and counts the answers by pod, checking the
// peer address each pod saw.
func spread(t *testing.T, ns, addr string, n int, wantPeer string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		r, err := request(ns, addr)
		if err != nil {
			t.Fatalf("request %d to %s from %s: %v", i+1, addr, ns, err)
		}
		pod, peer, _ := strings.Cut(r, " ")
		if peer != wantPeer {
			t.Errorf("%s answered for %s from peer %s, want %s", pod, addr, peer, wantPeer)
		}
		counts[pod]++
	}
	return counts
}
