package conntrack

import (
	"context"
	"net/netip"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Kernel topology: a "node" namespace with bridge br0 (10.244.0.1/24) and
// two "pod" namespaces on it, A (10.244.0.10) and B (10.244.0.11), each
// running a UDP server on port 53 that answers its name. The node itself
// is the client; the service 10.96.0.10:53 exists only as iptables rules
// the test writes in the node namespace.
var (
	kNode      = addr("10.244.0.1")
	kEpA       = addrPort("10.244.0.10:53")
	kEpB       = addrPort("10.244.0.11:53")
	kClusterIP = addrPort("10.96.0.10:53")
)

type kernelNet struct {
	node, podA, podB string
	table            *NetlinkTable
}

func setupKernelNet(t *testing.T) *kernelNet {
	t.Helper()
	kerneltest.Require(t)
	n := &kernelNet{node: kerneltest.NewNetns(t, "syct-"+"node"), podA: kerneltest.NewNetns(t, "syct-"+"a"), podB: kerneltest.NewNetns(t, "syct-"+"b")}
	kerneltest.Run(t, "ip", "-n", n.node, "link", "add", "br0", "type", "bridge")
	kerneltest.Run(t, "ip", "-n", n.node, "addr", "add", kNode.String()+"/24", "dev", "br0")
	kerneltest.Run(t, "ip", "-n", n.node, "link", "set", "br0", "up")
	// Service addresses are routed out of the bridge, as to a default
	// gateway: unNATed packets leave the node (and go nowhere).
	kerneltest.Run(t, "ip", "-n", n.node, "route", "add", "10.96.0.0/16", "dev", "br0")
	n.addPod(t, n.podA, "va", kEpA.Addr())
	n.addPod(t, n.podB, "vb", kEpB.Addr())
	// kube-proxy-like base rules: a service chain called from OUTPUT, and
	// masquerading in POSTROUTING, which also turns conntrack on in the
	// namespace (a filter rule alone would not).
	n.ipt(t, "-t", "nat", "-N", "SVC")
	n.ipt(t, "-t", "nat", "-A", "OUTPUT", "-j", "SVC")
	n.ipt(t, "-t", "nat", "-A", "POSTROUTING", "-m", "mark", "--mark", "0x4000/0x4000", "-j", "MASQUERADE")
	startServer(t, n.podA, "A", kEpA)
	startServer(t, n.podB, "B", kEpB)
	n.table = netlinkTableIn(t, n.node)
	return n
}

func (n *kernelNet) addPod(t *testing.T, pod, veth string, ip netip.Addr) {
	t.Helper()
	kerneltest.Run(t, "ip", "-n", n.node, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pod)
	kerneltest.Run(t, "ip", "-n", n.node, "link", "set", veth, "master", "br0", "up")
	kerneltest.Run(t, "ip", "-n", pod, "addr", "add", ip.String()+"/24", "dev", "eth0")
	kerneltest.Run(t, "ip", "-n", pod, "link", "set", "eth0", "up")
	kerneltest.Run(t, "ip", "-n", pod, "route", "add", "default", "via", kNode.String())
}

// ipt runs iptables (iptables-nft on this machine) in the node namespace.
func (n *kernelNet) ipt(t *testing.T, args ...string) {
	t.Helper()
	kerneltest.Run(t, append([]string{"ip", "netns", "exec", n.node, "iptables", "-w"}, args...)...)
}

// dnatTo is the service rule sending all traffic to one endpoint.
func dnatTo(ep netip.AddrPort) []string {
	return []string{"-d", kClusterIP.Addr().String() + "/32", "-p", "udp", "--dport", "53",
		"-j", "DNAT", "--to-destination", ep.String()}
}

// kernelState is the State a sync would have applied: the service with
// the given endpoints.
func kernelState(endpoints ...netip.AddrPort) *proxier.State {
	return kernelServiceState(dnsName, kClusterIP, endpoints...)
}

// kernelServiceState is the State of one service port at svc with ready
// endpoints, on the kernel topology's node.
func kernelServiceState(name proxier.ServicePortName, svc netip.AddrPort, endpoints ...netip.AddrPort) *proxier.State {
	sp := &proxier.ServicePort{Name: name, Protocol: name.Protocol, Port: svc.Port(),
		ClusterIPs: []netip.Addr{svc.Addr()}}
	var list []proxier.Endpoint
	for _, ep := range endpoints {
		list = append(list, ready(ep))
	}
	st := state(sp, list)
	st.Node.Addresses = []netip.Addr{kNode}
	return st
}

// TestKernelEndpointChange: the service moves from endpoint A to B. The
// client's conntrack entry keeps it on A until the reconciler deletes the
// entry; then its next packets reach B.
func TestKernelEndpointChange(t *testing.T) {
	n := setupKernelNet(t)
	n.ipt(t, append([]string{"-t", "nat", "-A", "SVC"}, dnatTo(kEpA)...)...)
	const port = 40000
	c := startClient(t, n.node, port, kClusterIP)
	c.waitFor(t, "A", 3)

	// The sync replaces the rule: all traffic now goes to B.
	n.ipt(t, append([]string{"-t", "nat", "-R", "SVC", "1"}, dnatTo(kEpB)...)...)
	c.drain()
	for _, r := range c.next(t, 5) {
		if r != "A" {
			t.Fatalf("without cleanup a reply came from %s, want A (the entry pins the flow)", r)
		}
	}
	f := flowFrom(t, n.table, port, kClusterIP)
	if f == nil {
		t.Fatal("no conntrack entry for the client's flow")
	}
	if got := tupleOf(f).replySrc; got != kEpA {
		t.Fatalf("entry reply source = %s, want %s", got, kEpA)
	}

	deleted, err := New(n.table, Config{}, nil).Reconcile(context.Background(), kernelState(kEpB), staleDiff(dnsName, kEpA))
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 1 {
		t.Errorf("deleted %d entries, want 1", deleted)
	}
	c.waitFor(t, "B", 5)
	if f := flowFrom(t, n.table, port, kClusterIP); f == nil || tupleOf(f).replySrc != kEpB {
		t.Errorf("after cleanup the client's entry is %v, want one NATed to %s", f, kEpB)
	}
}

// TestKernelZeroToOne: a UDP client sends to the service while it has no
// endpoints, then an endpoint appears.
//
// What the kernel does (measured here, kernel 6.x, iptables-nft): a packet
// REJECTed in the filter table leaves no conntrack entry (the entry is
// never confirmed), so once the DNAT rule is in the client reaches the
// endpoint by itself. A packet that found no rule at all (before the first
// sync, or from a window without rules) gets an entry that was never
// NATed, reply source = the service address; that entry keeps the client
// off the endpoint until the reconciler deletes it.
func TestKernelZeroToOne(t *testing.T) {
	newlyServing := emptyDiff()
	newlyServing.Changed[dnsName] = struct{}{}
	newlyServing.NewlyServing[dnsName] = struct{}{}

	t.Run("rejected", func(t *testing.T) {
		n := setupKernelNet(t)
		reject := []string{"OUTPUT", "-d", kClusterIP.Addr().String() + "/32", "-p", "udp", "--dport", "53",
			"-j", "REJECT"}
		n.ipt(t, append([]string{"-t", "filter", "-A"}, reject...)...)
		const port = 40010
		c := startClient(t, n.node, port, kClusterIP)
		c.waitSent(t, 5)
		if f := flowFrom(t, n.table, port, kClusterIP); f != nil {
			t.Fatalf("REJECTed flow has a conntrack entry: %v", f)
		}
		// The sync swaps REJECT for DNAT atomically; adding the DNAT rule
		// first does the same (DNATed packets no longer match the REJECT
		// rule). Removing REJECT first would open a window without rules
		// in which the client gets a never-NATed entry ("no rule" below).
		n.ipt(t, append([]string{"-t", "nat", "-A", "SVC"}, dnatTo(kEpA)...)...)
		c.waitFor(t, "A", 3) // no stale entry: reached without cleanup
		n.ipt(t, append([]string{"-t", "filter", "-D"}, reject...)...)
		deleted, err := New(n.table, Config{}, nil).Reconcile(context.Background(), kernelState(kEpA), newlyServing)
		if err != nil {
			t.Fatal(err)
		}
		if deleted != 0 {
			t.Errorf("deleted %d entries, want 0 (the entry to A is valid)", deleted)
		}
		c.waitFor(t, "A", 3)
	})

	t.Run("no rule", func(t *testing.T) {
		n := setupKernelNet(t)
		const port = 40011
		c := startClient(t, n.node, port, kClusterIP)
		c.waitSent(t, 3)
		f := flowFrom(t, n.table, port, kClusterIP)
		if f == nil || tupleOf(f).replySrc != kClusterIP {
			t.Fatalf("entry of the unanswered flow = %v, want one with reply source %s", f, kClusterIP)
		}
		n.ipt(t, append([]string{"-t", "nat", "-A", "SVC"}, dnatTo(kEpA)...)...)
		c.waitSent(t, 5)
		if f := flowFrom(t, n.table, port, kClusterIP); f == nil || tupleOf(f).replySrc != kClusterIP {
			t.Fatalf("after the DNAT rule, entry = %v, want it still un-NATed (reply source %s)", f, kClusterIP)
		}
		deleted, err := New(n.table, Config{}, nil).Reconcile(context.Background(), kernelState(kEpA), newlyServing)
		if err != nil {
			t.Fatal(err)
		}
		if deleted != 1 {
			t.Errorf("deleted %d entries, want 1", deleted)
		}
		c.waitFor(t, "A", 3)
	})
}
