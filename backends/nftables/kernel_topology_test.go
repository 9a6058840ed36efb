package nftables_test

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
//	client (192.168.77.2) --veth-- node (192.168.77.1; br0 10.244.0.1/24) --bridge-- pods 10.244.0.10..
//
// The node runs the backend and forwards between the client and the pods.
// It has no default route, so a packet for a service address nothing
// programmed is answered with "network unreachable": only the backend's
// reject rules can make such an address refuse.
const (
	bridgeIP  = "10.244.0.1"
	nodeIP    = "192.168.77.1"
	clientIP  = "192.168.77.2"
	echoPort  = 8080
	podPrefix = "10.244.0."
)

type trafficTopo struct {
	node, client string
	pods         []string // namespace per pod; pod i is "pod<i>" at podIP(i)
}

func podIP(i int) string { return fmt.Sprintf("%s%d", podPrefix, 10+i) }

func run(t *testing.T, args ...string) string { t.Helper(); return kerneltest.Run(t, args...) }

// newTrafficTopo builds the namespaces and links, and starts a TCP and UDP
// echo server in every pod. Everything goes with the namespaces when the
// test ends.
func newTrafficTopo(t *testing.T, pods int) *trafficTopo {
	t.Helper()
	tp := &trafficTopo{node: kerneltest.NewNetns(t, "nftnode"), client: kerneltest.NewNetns(t, "nftcli")}
	n := tp.node
	run(t, "ip", "-n", n, "link", "add", "br0", "type", "bridge")
	run(t, "ip", "-n", n, "addr", "add", bridgeIP+"/24", "dev", "br0")
	run(t, "ip", "-n", n, "link", "set", "br0", "up")
	// The kernel rate-limits the ICMP errors a reject sends (1 s per
	// peer, burst 6); the UDP refusal checks send more than 6.
	run(t, "ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.icmp_ratelimit=0")
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

// startEcho listens on TCP and UDP echoPort in ns. A TCP connection is
// answered at once, a UDP datagram by one datagram, each with the
// server's name and the address the traffic came from.
func startEcho(t *testing.T, ns, name string) {
	t.Helper()
	tcp, udp := listenIn(t, ns, "0.0.0.0", echoPort)
	answer := func(peer net.Addr) []byte {
		host, _, _ := net.SplitHostPort(peer.String())
		return []byte(name + " " + host + "\n")
	}
	go func() {
		for {
			c, err := tcp.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write(answer(c.RemoteAddr()))
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			_, peer, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = udp.WriteTo(answer(peer), peer)
		}
	}()
}

// listenIn opens a TCP listener and a UDP socket on host:port inside ns
// (sockets stay in the namespace they were made in) and closes them when
// the test ends.
func listenIn(t *testing.T, ns, host string, port int) (net.Listener, net.PacketConn) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	addr := net.JoinHostPort(host, fmt.Sprint(port))
	err := kerneltest.InNetns(ns, func() (err error) {
		if ln, err = net.Listen("tcp", addr); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp", addr)
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, ns, err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	return ln, pc
}

// ioTimeout keeps a lost packet from hanging the test.
const ioTimeout = 2 * time.Second

// request opens one connection ("tcp" or "udp") from ns to addr and
// returns the answer ("pod0 192.168.77.2"). Over UDP it sends one
// datagram first. Errors keep their errno (syscall.ECONNREFUSED, ...).
func request(ns, network, addr string) (string, error) {
	var conn net.Conn
	err := kerneltest.InNetns(ns, func() (err error) {
		d := net.Dialer{Timeout: ioTimeout}
		conn, err = d.DialContext(context.Background(), network, addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(ioTimeout))
	if network == "udp" {
		if _, err := conn.Write([]byte("hello\n")); err != nil {
			return "", err
		}
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// isRefused reports a TCP reset or an ICMP port unreachable, not a
// timeout or an unreachable network.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// spread sends n requests and counts the answers by pod, checking the
// peer address each pod saw unless wantPeer is "".
func spread(t *testing.T, ns, network, addr string, n int, wantPeer string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		r, err := request(ns, network, addr)
		if err != nil {
			t.Fatalf("%s request %d to %s from %s: %v", network, i+1, addr, ns, err)
		}
		pod, peer, _ := strings.Cut(r, " ")
		if wantPeer != "" && peer != wantPeer {
			t.Errorf("%s answered %s %s from peer %s, want %s", pod, network, addr, peer, wantPeer)
		}
		counts[pod]++
	}
	return counts
}

// expectPods checks that the answers came only from the wanted pods and
// from each of them.
func expectPods(t *testing.T, got map[string]int, want ...string) {
	t.Helper()
	wanted := map[string]bool{}
	for _, pod := range want {
		wanted[pod] = true
		if got[pod] == 0 {
			t.Errorf("answers %v: %s never reached", got, pod)
		}
	}
	for pod := range got {
		if !wanted[pod] {
			t.Errorf("answers %v: %s must not be reached", got, pod)
		}
	}
}
