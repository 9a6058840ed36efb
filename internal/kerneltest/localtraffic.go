package kerneltest

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// LocalTrafficTopology is a node, in namespaces, for the local-traffic
// detection tests (--detect-local-mode): who reaches a service through the
// node, and on which interface the node sees them come in.
//
//	client 192.168.78.2 --eth-client-- node 192.168.78.1
//	bridge pod 10.244.0.21 --veth on br0 (10.244.0.1/24)-- node
//	veth pod   10.245.0.2  --cali7f3a (10.245.0.1/30)-- node   (outside the cluster CIDR)
//	endpoint   10.244.5.10 --veth-ep (10.244.5.1/24)-- node    (echo server on 8080)
//
// Every client is routed through the node to the endpoint and back (no
// traffic is bridged between pods, so br_netfilter is not needed). The
// endpoint answers each connection with the source address it sees:
// EndpointGateway when the node masqueraded the connection.
type LocalTrafficTopology struct {
	Node, Client, BridgePod, VethPod, Endpoint string // namespace names
}

// Addresses and interfaces of LocalTrafficTopology.
const (
	LTNodeIP          = "192.168.78.1"
	LTClientIP        = "192.168.78.2"
	LTBridge          = "br0"
	LTBridgePodIP     = "10.244.0.21"
	LTVethPrefix      = "cali"
	LTVethPodIP       = "10.245.0.2"
	LTEndpointIP      = "10.244.5.10"
	LTEndpointGateway = "10.244.5.1"
	LTEndpointPort    = 8080
	// LTClusterCIDR holds the bridge pod and the endpoint, not the veth
	// pod; LTNodePodCIDR is the node's spec.podCIDRs (the bridge).
	LTClusterCIDR = "10.244.0.0/16"
	LTNodePodCIDR = "10.244.0.0/24"
)

// NewLocalTrafficTopology builds the namespaces, links and routes and
// starts the endpoint's echo server; all of it goes when the test ends.
func NewLocalTrafficTopology(tb testing.TB) *LocalTrafficTopology {
	tb.Helper()
	tp := &LocalTrafficTopology{Node: NewNetns(tb, "sylt-node"), Client: NewNetns(tb, "sylt-client"),
		BridgePod: NewNetns(tb, "sylt-brpod"), VethPod: NewNetns(tb, "sylt-vethpod"), Endpoint: NewNetns(tb, "sylt-ep")}
	n := tp.Node
	cmds := [][]string{
		{"ip", "-n", n, "link", "add", LTBridge, "type", "bridge"},
		{"ip", "-n", n, "addr", "add", "10.244.0.1/24", "dev", LTBridge},
		{"ip", "-n", n, "link", "set", LTBridge, "up"},
		{"ip", "netns", "exec", n, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	cmds = append(cmds, link(n, "eth-client", tp.Client, LTNodeIP+"/24", LTClientIP+"/24", "")...)
	cmds = append(cmds, []string{"ip", "-n", n, "route", "add", "default", "via", LTClientIP})
	cmds = append(cmds, link(n, "veth-brpod", tp.BridgePod, "", LTBridgePodIP+"/24", "10.244.0.1")...)
	cmds = append(cmds, []string{"ip", "-n", n, "link", "set", "veth-brpod", "master", LTBridge})
	cmds = append(cmds, link(n, LTVethPrefix+"7f3a", tp.VethPod, "10.245.0.1/30", LTVethPodIP+"/30", "10.245.0.1")...)
	cmds = append(cmds, link(n, "veth-ep", tp.Endpoint, LTEndpointGateway+"/24", LTEndpointIP+"/24", LTEndpointGateway)...)
	for _, c := range cmds {
		Run(tb, c...)
	}
	tp.serveEndpoint(tb)
	return tp
}

// link is a veth pair: hostSide in the node namespace (with hostAddr if
// set), "eth0" in peer with peerAddr and, if gw is set, a default route.
// The client's default route is set here too (via the node).
func link(node, hostSide, peer, hostAddr, peerAddr, gw string) [][]string {
	out := [][]string{{"ip", "-n", node, "link", "add", hostSide, "type", "veth", "peer", "name", "eth0", "netns", peer}}
	if hostAddr != "" {
		out = append(out, []string{"ip", "-n", node, "addr", "add", hostAddr, "dev", hostSide})
	}
	out = append(out, []string{"ip", "-n", node, "link", "set", hostSide, "up"},
		[]string{"ip", "-n", peer, "addr", "add", peerAddr, "dev", "eth0"},
		[]string{"ip", "-n", peer, "link", "set", "eth0", "up"})
	if gw == "" {
		gw = LTNodeIP
	}
	return append(out, []string{"ip", "-n", peer, "route", "add", "default", "via", gw})
}

// serveEndpoint answers every TCP connection on the endpoint with the
// source address it came from.
func (tp *LocalTrafficTopology) serveEndpoint(tb testing.TB) {
	var ln net.Listener
	err := InNetns(tp.Endpoint, func() (err error) {
		ln, err = net.Listen("tcp", fmt.Sprintf(":%d", LTEndpointPort))
		return err
	})
	if err != nil {
		tb.Fatalf("echo server: %v", err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
			_, _ = conn.Write([]byte(host + "\n"))
			conn.Close()
		}
	}()
}

// SourceSeen connects from the namespace ns to addr (a service) and
// returns the source address the endpoint saw.
func (tp *LocalTrafficTopology) SourceSeen(ns, addr string) (string, error) {
	var seen string
	err := InNetns(ns, func() error {
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		seen = strings.TrimSpace(line)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("from %s to %s: %w", ns, addr, err)
	}
	return seen, nil
}

// CheckLocalTraffic connects to addr (a cluster IP whose only endpoint is
// LocalTrafficTopology's) from every source and checks that the sources
// named in kept ("bridge pod", "veth pod", "client", "node": local
// traffic) keep their address and the rest are masqueraded.
func (tp *LocalTrafficTopology) CheckLocalTraffic(t *testing.T, addr string, kept []string) {
	t.Helper()
	for _, src := range []struct{ name, ns, ip string }{
		{"bridge pod", tp.BridgePod, LTBridgePodIP}, {"veth pod", tp.VethPod, LTVethPodIP},
		{"client", tp.Client, LTClientIP}, {"node", tp.Node, LTNodeIP},
	} {
		seen, err := tp.SourceSeen(src.ns, addr)
		if err != nil {
			t.Errorf("%s: %v", src.name, err)
			continue
		}
		want, what := LTEndpointGateway, "masqueraded"
		if slices.Contains(kept, src.name) {
			want, what = src.ip, "local: source kept"
		}
		if seen != want {
			t.Errorf("%s (%s) -> %s: endpoint saw %s, want %s (%s)", src.name, src.ip, addr, seen, want, what)
		}
	}
}
