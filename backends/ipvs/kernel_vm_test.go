package ipvs_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// Topology of the kernel tests, all in namespaces of the VM:
//
//	sy-client (10.244.9.2-9/24, 203.0.113.7) ──veth── sy-node ──veth── sy-pod-a (10.244.1.2, server "pod-a")
//	                                                  │ 192.168.0.10   └─veth── sy-pod-b (10.244.2.2, server "pod-b")
//	                                                  └ the backend under test (NewKernel("sy-node"))
//
// The same links also carry IPv6 (addIPv6Topology): fd00:10:244:{1,2,9}::/64,
// the node's 2001:db8::10, the outside client 2001:db8:ffff::7.
const (
	nsNode, nsClient = "sy-node", "sy-client"
	vmNodeIP         = "192.168.0.10"
)

var (
	clientIP = netip.MustParseAddr("10.244.9.2")
	outsider = netip.MustParseAddr("203.0.113.7")
)

func buildTopology(t *testing.T) {
	t.Helper()
	for _, ns := range []string{nsNode, nsClient, "sy-pod-a", "sy-pod-b"} {
		newNamedNetns(t, ns)
	}
	link(t, nsNode, "sy-pod-a", "veth-a", "10.244.1.1/24", "10.244.1.2/24")
	link(t, nsNode, "sy-pod-b", "veth-b", "10.244.2.1/24", "10.244.2.2/24")
	link(t, nsNode, nsClient, "veth-c", "10.244.9.1/24", "10.244.9.2/24")
	node, client := nlHandle(t, nsNode), nlHandle(t, nsClient)
	eth0, err := client.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= 9; i++ {
		if err := client.AddrAdd(eth0, mustPrefix(fmt.Sprintf("10.244.9.%d/32", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.AddrAdd(eth0, mustPrefix(outsider.String()+"/32")); err != nil {
		t.Fatal(err)
	}
	vethC, err := node.LinkByName("veth-c")
	if err == nil {
		err = node.RouteAdd(&netlink.Route{LinkIndex: vethC.Attrs().Index, Dst: mustPrefix(outsider.String() + "/32").IPNet})
	}
	if err != nil {
		t.Fatal(err)
	}
	nic := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "nic0"}}
	if err := node.LinkAdd(nic); err != nil {
		t.Fatal(err)
	}
	if err := node.AddrAdd(nic, mustPrefix(vmNodeIP+"/32")); err != nil {
		t.Fatal(err)
	}
	if err := node.LinkSetUp(nic); err != nil {
		t.Fatal(err)
	}
	podServer(t, "sy-pod-a", "pod-a", "10.244.1.2:8080")
	podServer(t, "sy-pod-b", "pod-b", "10.244.2.2:8080")
	addIPv6Topology(t)
}

// recorder counts the calls that change the kernel.
type recorder struct {
	sy.IPVS
	writes []string
}

func (r *recorder) NewService(s *ipvs.Service) error {
	r.writes = append(r.writes, "NewService")
	return r.IPVS.NewService(s)
}

func (r *recorder) UpdateService(s *ipvs.Service) error {
	r.writes = append(r.writes, "UpdateService")
	return r.IPVS.UpdateService(s)
}

func (r *recorder) DelService(s *ipvs.Service) error {
	r.writes = append(r.writes, "DelService")
	return r.IPVS.DelService(s)
}

func (r *recorder) NewDestination(s *ipvs.Service, d *ipvs.Destination) error {
	r.writes = append(r.writes, "NewDestination")
	return r.IPVS.NewDestination(s, d)
}

func (r *recorder) UpdateDestination(s *ipvs.Service, d *ipvs.Destination) error {
	r.writes = append(r.writes, fmt.Sprintf("UpdateDestination weight=%d", d.Weight))
	return r.IPVS.UpdateDestination(s, d)
}

func (r *recorder) DelDestination(s *ipvs.Service, d *ipvs.Destination) error {
	r.writes = append(r.writes, "DelDestination")
	return r.IPVS.DelDestination(s, d)
}

// vmBackend is the real backend in sy-node.
type vmBackend struct {
	t     *testing.T
	k     *sy.Kernel
	rec   *recorder
	b     *sy.Backend
	state *proxier.State
}

// vmKernel is opened once per TestKernel: opening it runs iptables mode
// detection, a dozen execs that are slow under TCG.
type vmKernel struct {
	k   *sy.Kernel
	rec *recorder
}

func openVMKernel(t *testing.T) *vmKernel {
	t.Helper()
	k, err := sy.NewKernel(nsNode)
	if err != nil {
		t.Fatalf("NewKernel: %v", err)
	}
	t.Cleanup(k.Close)
	rec := &recorder{IPVS: k.IPVS}
	k.IPVS = rec
	return &vmKernel{k: k, rec: rec}
}

// backend builds a backend on the shared kernel; it is cleaned up when
// the (sub)test ends.
func (vk *vmKernel) backend(t *testing.T, scheduler string) *vmBackend {
	t.Helper()
	b, err := sy.New(sy.Config{Kernel: vk.k, Scheduler: scheduler, GracefulTerminationTimeout: 10 * time.Minute,
		LocalDetector: proxier.DetectByClusterCIDRs(clusterCIDR)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	vk.rec.writes = nil
	v := &vmBackend{t: t, k: vk.k, rec: vk.rec, b: b, state: &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr(vmNodeIP)}},
	}}
	t.Cleanup(func() {
		if err := b.Cleanup(context.Background()); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	return v
}

var (
	podA = proxier.Endpoint{IP: netip.MustParseAddr("10.244.1.2"), Port: 8080, Ready: true, Serving: true, IsLocal: true, NodeName: "node-a"}
	podB = proxier.Endpoint{IP: netip.MustParseAddr("10.244.2.2"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"}
)

func (v *vmBackend) service(name, ip string, eps []proxier.Endpoint, mutate ...func(*proxier.ServicePort)) proxier.ServicePortName {
	n := spn(name, v1.ProtocolTCP)
	sp := &proxier.ServicePort{Name: n, Protocol: v1.ProtocolTCP, Port: 80, ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)}}
	for _, m := range mutate {
		m(sp)
	}
	v.state.Services[n], v.state.Endpoints[n] = sp, eps
	return n
}

func (v *vmBackend) sync(diff *proxier.Diff) {
	v.t.Helper()
	if _, err := v.b.Sync(context.Background(), v.state, diff); err != nil {
		v.t.Fatalf("Sync: %v", err)
	}
}

// pods makes n connections from src (closing each) and returns the pods.
func pods(t *testing.T, src netip.Addr, dst string, n int) []string {
	t.Helper()
	var out []string
	for range n {
		c, err := dial(nsClient, src, dst)
		if err != nil {
			t.Fatalf("dial %s from %s: %v", dst, src, err)
		}
		out = append(out, c.Pod)
		c.Close()
	}
	return out
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// dests reads a virtual server's real servers from the kernel.
func (v *vmBackend) dests(key string) map[string]*ipvs.Destination {
	v.t.Helper()
	svcs, err := v.k.IPVS.GetServices()
	if err != nil {
		v.t.Fatal(err)
	}
	for _, s := range svcs {
		a, _ := netip.AddrFromSlice(s.Address)
		if fmt.Sprintf("TCP/%s", netip.AddrPortFrom(a.Unmap(), s.Port)) != key || s.FWMark != 0 {
			continue
		}
		ds, err := v.k.IPVS.GetDestinations(s)
		if err != nil {
			v.t.Fatal(err)
		}
		out := map[string]*ipvs.Destination{}
		for _, d := range ds {
			a, _ := netip.AddrFromSlice(d.Address)
			out[netip.AddrPortFrom(a.Unmap(), d.Port).String()] = d
		}
		return out
	}
	return nil
}

func TestKernel(t *testing.T) {
	requireVM(t)
	buildTopology(t)
	vk := openVMKernel(t)
	cases := []struct {
		name, scheduler string
		run             func(t *testing.T, v *vmBackend)
	}{
		{"rr alternates", "rr", testRoundRobin},
		{"sh sticks per source", "sh", testSourceHashing},
		{"dh sticks per destination", "dh", testDestinationHashing},
		{"lc prefers the idle server", "lc", testLeastConnection},
		{"session affinity pins the client", "rr", testAffinity},
		{"NodePort", "rr", testNodePort},
		{"externalTrafficPolicy Local", "rr", testLocalPolicy},
		{"no endpoints rejects", "rr", testNoEndpoints},
		{"graceful removal", "rr", testGracefulRemoval},
		{"resync changes nothing", "sh", testIdempotentResync},
		{"service traffic counters", "rr", testServiceTraffic},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, vk.backend(t, c.scheduler)) })
	}
	t.Run("repairs each damage in one verifying sync", func(t *testing.T) { testRepairs(t, vk) })
	t.Run("Cleanup leaves nothing", func(t *testing.T) { testCleanup(t, vk.k) })
}

var both = []proxier.Endpoint{podA, podB}

func testRoundRobin(t *testing.T, v *vmBackend) {
	v.service("web", "10.96.0.10", both)
	v.sync(nil)
	got := pods(t, clientIP, "10.96.0.10:80", 6)
	for i := 1; i < len(got); i++ {
		if got[i] == got[i-1] {
			t.Errorf("rr: %v does not alternate", got)
			break
		}
	}
	c, err := dial(nsClient, clientIP, "10.96.0.10:80")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Source != clientIP {
		t.Errorf("pod-CIDR client seen as %s: masqueraded", c.Source)
	}
}

func testSourceHashing(t *testing.T, v *vmBackend) {
	v.service("web", "10.96.0.10", both)
	v.sync(nil)
	seen := map[string]bool{}
	for i := 2; i <= 9; i++ {
		src := netip.MustParseAddr(fmt.Sprintf("10.244.9.%d", i))
		got := pods(t, src, "10.96.0.10:80", 3)
		if count(got, got[0]) != 3 {
			t.Errorf("sh: source %s reached %v", src, got)
		}
		seen[got[0]] = true
	}
	t.Logf("sh: 8 sources spread over %d pods", len(seen))
}

func testDestinationHashing(t *testing.T, v *vmBackend) {
	v.service("web", "10.96.0.10", both)
	v.sync(nil)
	var all []string
	for i := 2; i <= 9; i++ {
		all = append(all, pods(t, netip.MustParseAddr(fmt.Sprintf("10.244.9.%d", i)), "10.96.0.10:80", 2)...)
	}
	if count(all, all[0]) != len(all) {
		t.Errorf("dh: one destination reached %v", all)
	}
}

func testLeastConnection(t *testing.T, v *vmBackend) {
	v.service("web", "10.96.0.10", both)
	v.sync(nil)
	held, err := dial(nsClient, clientIP, "10.96.0.10:80")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	got := pods(t, clientIP, "10.96.0.10:80", 4)
	if count(got, held.Pod) != 0 {
		t.Errorf("lc: busy %s got new connections: %v", held.Pod, got)
	}
}

func testAffinity(t *testing.T, v *vmBackend) {
	v.service("web", "10.96.0.10", both, func(sp *proxier.ServicePort) { sp.AffinityTimeoutSeconds = 60 })
	v.sync(nil)
	got := pods(t, clientIP, "10.96.0.10:80", 6)
	if count(got, got[0]) != 6 {
		t.Errorf("affinity: %v", got)
	}
}

func testNoEndpoints(t *testing.T, v *vmBackend) {
	v.service("empty", "10.96.0.60", nil)
	v.sync(nil)
	_, err := dial(nsClient, clientIP, "10.96.0.60:80")
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial a service without endpoints: %v, want connection refused", err)
	}
}

func testNodePort(t *testing.T, v *vmBackend) {
	v.service("np", "10.96.0.30", both, func(sp *proxier.ServicePort) { sp.NodePort = 30080 })
	v.sync(nil)
	got := pods(t, clientIP, vmNodeIP+":30080", 4)
	if count(got, "pod-a") != 2 || count(got, "pod-b") != 2 {
		t.Errorf("NodePort: %v", got)
	}
	c, err := dial(nsClient, outsider, vmNodeIP+":30080")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Source == outsider {
		t.Errorf("NodePort with Cluster policy kept the client source %s (want masquerade)", c.Source)
	}
	local, err := dial(nsNode, netip.Addr{}, vmNodeIP+":30080")
	if err != nil {
		t.Fatalf("NodePort from the node itself: %v", err)
	}
	local.Close()
}

func testLocalPolicy(t *testing.T, v *vmBackend) {
	v.service("local", "10.96.0.40", []proxier.Endpoint{podA, podB}, func(sp *proxier.ServicePort) {
		sp.NodePort, sp.ExternalPolicyLocal = 30040, true
	})
	v.sync(nil)
	dst := vmNodeIP + ":30040"
	ext := pods(t, outsider, dst, 4)
	if count(ext, "pod-a") != 4 {
		t.Errorf("outside client reached %v, want only the local pod-a", ext)
	}
	c, err := dial(nsClient, outsider, dst)
	if err != nil {
		t.Fatal(err)
	}
	if c.Source != outsider {
		t.Errorf("eTP=Local: client source %s not kept (seen %s)", outsider, c.Source)
	}
	c.Close()
	in := pods(t, clientIP, dst, 4)
	if count(in, "pod-a") == 0 || count(in, "pod-b") == 0 {
		t.Errorf("pod client reached %v, want every endpoint (fwmark service)", in)
	}
}

func testGracefulRemoval(t *testing.T, v *vmBackend) {
	web := v.service("web", "10.96.0.10", []proxier.Endpoint{podA, podB})
	v.sync(nil)
	held, err := dial(nsClient, clientIP, "10.96.0.10:80")
	if err != nil {
		t.Fatal(err)
	}
	gone, stay := podA, podB
	if held.Pod == "pod-b" {
		gone, stay = podB, podA
	}
	v.state.Endpoints[web] = []proxier.Endpoint{stay}
	v.rec.writes = nil
	v.sync(changed(web))
	d := v.dests("TCP/10.96.0.10:80")[gone.String()]
	if d == nil || d.Weight != 0 || d.ActiveConnections != 1 {
		t.Fatalf("removed real server with a connection: %+v, want weight 0 and 1 active", d)
	}
	if got := pods(t, clientIP, "10.96.0.10:80", 3); count(got, held.Pod) != 0 {
		t.Errorf("draining %s got new connections: %v", held.Pod, got)
	}
	held.reset()
	// The reset moves the IPVS connection to CLOSE (10 s); once it expires
	// the next sync deletes the server, long before the 10 min timeout.
	deadline := time.Now().Add(90 * time.Second)
	for v.dests("TCP/10.96.0.10:80")[gone.String()] != nil {
		if time.Now().After(deadline) {
			t.Fatalf("draining server never deleted: %+v", v.dests("TCP/10.96.0.10:80")[gone.String()])
		}
		time.Sleep(time.Second)
		v.sync(changed())
	}
	want := []string{"UpdateDestination weight=0", "DelDestination"}
	if !slices.Equal(v.rec.writes, want) {
		t.Errorf("IPVS writes %v, want %v", v.rec.writes, want)
	}
}

// testIdempotentResync: a full resync of an unchanged state writes
// nothing, which proves that what the backend reads back from the kernel
// (flags, netmask, set entries) compares equal to what it wrote.
func testIdempotentResync(t *testing.T, v *vmBackend) {
	v.service("web", "10.96.0.10", []proxier.Endpoint{podA, podB}, func(sp *proxier.ServicePort) {
		sp.AffinityTimeoutSeconds, sp.NodePort = 300, 30090
		sp.ExternalPolicyLocal = true
		sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.10")}
		sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.10")}
		sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("192.0.2.7/32")}
	})
	v.service("empty", "10.96.0.60", nil)
	v.sync(nil)
	saved, err := v.k.IPSet.Save(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v.rec.writes = nil
	counter := &setCounter{ipsetInterface: v.k.IPSet}
	v.k.IPSet = counter
	defer func() { v.k.IPSet = counter.ipsetInterface }()
	v.sync(full())
	if len(v.rec.writes) != 0 || len(counter.restores) != 0 {
		t.Errorf("full resync wrote IPVS %v, ipset %q\nipset save was:\n%s", v.rec.writes, counter.restores, saved)
	}
}

type setCounter struct {
	ipsetInterface
	restores []string
}

func (s *setCounter) Restore(ctx context.Context, data []byte) error {
	s.restores = append(s.restores, string(data))
	return s.ipsetInterface.Restore(ctx, data)
}

func testCleanup(t *testing.T, k *sy.Kernel) {
	b, err := sy.New(sy.Config{Kernel: k, LocalDetector: proxier.DetectByClusterCIDRs(clusterCIDR)})
	if err != nil {
		t.Fatal(err)
	}
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr(vmNodeIP)}}}
	n := spn("web", v1.ProtocolTCP)
	st.Services[n] = &proxier.ServicePort{Name: n, Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, ExternalPolicyLocal: true}
	st.Endpoints[n] = []proxier.Endpoint{podA}
	if _, err := b.Sync(context.Background(), st, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Cleanup(context.Background()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if svcs, err := k.IPVS.GetServices(); err != nil || len(svcs) != 0 {
		t.Errorf("virtual servers left: %d (%v)", len(svcs), err)
	}
	if _, err := k.Netlink.ListAddresses(sy.DummyInterface); !errors.Is(err, sy.ErrLinkNotFound) {
		t.Errorf("kube-ipvs0 left (%v)", err)
	}
	if saved, err := k.IPSet.Save(context.Background()); err != nil || strings.Contains(string(saved), "KUBE-") {
		t.Errorf("sets left (%v):\n%s", err, saved)
	}
	for _, table := range []string{"nat", "filter"} {
		data, err := k.IPTables.SaveTable(context.Background(), runner.IPv4, table)
		if err != nil || strings.Contains(string(data), "KUBE-") {
			t.Errorf("%s rules left (%v):\n%s", table, err, data)
		}
	}
}

// testServiceTraffic: IPVS' stats of the cluster IP's virtual server,
// read as --service-traffic-metrics reads them, count each connection
// once, and its packets and bytes from the client. The kernel adds its
// per-CPU counters into what it reports only on its estimator's round,
// every 2 s, so the counts are polled for.
func testServiceTraffic(t *testing.T, v *vmBackend) {
	v.service("web", "10.96.0.10", both)
	v.sync(nil)
	read := func() metrics.ServiceTrafficSample {
		samples, err := v.b.ServiceTraffic(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range metrics.SumServiceTraffic(samples) {
			if s.Service == "web" {
				return s
			}
		}
		t.Fatalf("no sample for web in %+v", samples)
		return metrics.ServiceTrafficSample{}
	}
	before := read()
	const n = 10
	pods(t, clientIP, "10.96.0.10:80", n)
	sent := time.Now()
	after := read()
	for after.Connections-before.Connections < n && time.Since(sent) < 10*time.Second {
		time.Sleep(250 * time.Millisecond)
		after = read()
	}
	t.Logf("counts complete %v after the last connection", time.Since(sent).Round(10*time.Millisecond))
	dc, dp, db := after.Connections-before.Connections, after.Packets-before.Packets, after.Bytes-before.Bytes
	t.Logf("%d connections through the cluster IP: +%d connections, +%d packets, +%d bytes", n, dc, dp, db)
	if dc != n || dp < n || db < dp*20 {
		t.Errorf("counters moved by %d connections, %d packets, %d bytes; want exactly %d connections and a packet with headers each", dc, dp, db, n)
	}
}
