package ipvs_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// IPv6 of the kernel-test topology (added by addIPv6Topology): the same
// veths carry fd00:10:244:N::/64, the node's nic0 2001:db8::10, the
// client also 2001:db8:ffff::7 (routed to it like the IPv4 outsider).
const vmNodeIP6 = "2001:db8::10"

var outsider6 = netip.MustParseAddr("2001:db8:ffff::7")

func addIPv6Topology(t *testing.T) {
	t.Helper()
	steps := []struct{ ns, link, addr, gw string }{
		{nsNode, "veth-a", "fd00:10:244:1::1/64", ""},
		{nsNode, "veth-b", "fd00:10:244:2::1/64", ""},
		{nsNode, "veth-c", "fd00:10:244:9::1/64", ""},
		{nsNode, "nic0", vmNodeIP6 + "/128", ""},
		{"sy-pod-a", "eth0", "fd00:10:244:1::2/64", "fd00:10:244:1::1"},
		{"sy-pod-b", "eth0", "fd00:10:244:2::2/64", "fd00:10:244:2::1"},
		{nsClient, "eth0", "fd00:10:244:9::2/64", "fd00:10:244:9::1"},
		{nsClient, "eth0", "fd00:10:244:9::3/128", ""},
		{nsClient, "eth0", outsider6.String() + "/128", ""},
	}
	for _, s := range steps {
		if err := addAddr6(t, s.ns, s.link, s.addr, s.gw); err != nil {
			t.Fatalf("IPv6 %s %s %s: %v", s.ns, s.link, s.addr, err)
		}
	}
	node := nlHandle(t, nsNode)
	vethC, err := node.LinkByName("veth-c")
	if err == nil {
		err = node.RouteAdd(&netlink.Route{LinkIndex: vethC.Attrs().Index, Dst: mustPrefix(outsider6.String() + "/128").IPNet})
	}
	if err == nil {
		// IPVS replies from the real servers are forwarded to the client.
		err = kerneltest.InNetns(nsNode, func() error {
			return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644)
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	podServer(t, "sy-pod-a", "pod-a", "[fd00:10:244:1::2]:8080")
	podServer(t, "sy-pod-b", "pod-b", "[fd00:10:244:2::2]:8080")
}

// addAddr6 adds an IPv6 address without duplicate address detection
// (usable at once) and, with gw, a default route through it.
func addAddr6(t *testing.T, ns, link, addr, gw string) error {
	h := nlHandle(t, ns)
	l, err := h.LinkByName(link)
	if err != nil {
		return err
	}
	a := mustPrefix(addr)
	a.Flags = unix.IFA_F_NODAD
	if err := h.AddrAdd(l, a); err != nil {
		return err
	}
	if gw == "" {
		return nil
	}
	return h.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw)})
}

// repairFamily is one family's addresses in the repair test.
type repairFamily struct {
	family                  v1.IPFamily
	lbIP, nodeIP, clusterIP string // "fw" service: LB with source ranges, only endpoint pod-b
	selfIP                  string // "self" service: only endpoint pod-a
	inside, outside         netip.Addr
	nodeToB, nodeToA        netip.Addr // the node's address towards pod-b, pod-a (masquerade source)
	podA, podB              proxier.Endpoint
	sourceRange             netip.Prefix
}

func repairFamilies() []repairFamily {
	ep := func(ip string, local bool, node string) proxier.Endpoint {
		return proxier.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, IsLocal: local, NodeName: node}
	}
	return []repairFamily{
		{family: v1.IPv4Protocol, lbIP: "198.51.100.90", nodeIP: vmNodeIP, clusterIP: "10.96.0.90", selfIP: "10.96.0.91",
			inside: outsider, outside: netip.MustParseAddr("10.244.9.3"),
			nodeToB: netip.MustParseAddr("10.244.2.1"), nodeToA: netip.MustParseAddr("10.244.1.1"),
			podA: ep("10.244.1.2", true, "node-a"), podB: ep("10.244.2.2", false, "node-b"),
			sourceRange: netip.MustParsePrefix("203.0.113.0/24")},
		{family: v1.IPv6Protocol, lbIP: "2001:db8:100::90", nodeIP: vmNodeIP6, clusterIP: "fd00:10:96::90", selfIP: "fd00:10:96::91",
			inside: outsider6, outside: netip.MustParseAddr("fd00:10:244:9::3"),
			nodeToB: netip.MustParseAddr("fd00:10:244:2::1"), nodeToA: netip.MustParseAddr("fd00:10:244:1::1"),
			podA: ep("fd00:10:244:1::2", true, "node-a"), podB: ep("fd00:10:244:2::2", false, "node-b"),
			sourceRange: netip.MustParsePrefix("2001:db8:ffff::/48")},
	}
}

func addrs(f func(repairFamily) string) []netip.Addr {
	var out []netip.Addr
	for _, fam := range repairFamilies() {
		out = append(out, netip.MustParseAddr(f(fam)))
	}
	return out
}

// repairState is the dual-stack state of the repair test: "fw", a
// LoadBalancer service with loadBalancerSourceRanges and NodePort 30091
// whose only endpoint is on another node (pod-b), and "self", whose only
// endpoint is pod-a (hairpin).
func repairState() *proxier.State {
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr(vmNodeIP), netip.MustParseAddr(vmNodeIP6)}}}
	fw, self := spn("fw", v1.ProtocolTCP), spn("self", v1.ProtocolTCP)
	st.Services[fw] = &proxier.ServicePort{Name: fw, Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30091,
		ClusterIPs:      addrs(func(f repairFamily) string { return f.clusterIP }),
		LoadBalancerIPs: addrs(func(f repairFamily) string { return f.lbIP })}
	st.Services[self] = &proxier.ServicePort{Name: self, Protocol: v1.ProtocolTCP, Port: 80,
		ClusterIPs: addrs(func(f repairFamily) string { return f.selfIP })}
	for _, f := range repairFamilies() {
		st.Services[fw].LoadBalancerSourceRanges = append(st.Services[fw].LoadBalancerSourceRanges, f.sourceRange)
		st.Endpoints[fw] = append(st.Endpoints[fw], f.podB)
		st.Endpoints[self] = append(st.Endpoints[self], f.podA)
	}
	return st
}

// hostPort joins an address and port ("[v6]:port" for IPv6).
func hostPort(ip string, port uint16) string {
	return netip.AddrPortFrom(netip.MustParseAddr(ip), port).String()
}

// checkTraffic checks the four behaviours with connections in
// one family.
func checkTraffic(t *testing.T, f repairFamily) {
	t.Helper()
	lb := hostPort(f.lbIP, 80)
	if c, err := dial(nsClient, f.inside, lb); err != nil {
		t.Errorf("%s: client %s inside loadBalancerSourceRanges not served at %s: %v", f.family, f.inside, lb, err)
	} else {
		c.reset()
	}
	if err := dialRefused(nsClient, f.outside, lb); err != nil {
		t.Errorf("%s: %v", f.family, err)
	}
	checks := []struct {
		what, ns, dst string
		src           netip.Addr
		pod           string
		seen          func(netip.Addr) bool
	}{
		{"NodePort to a remote endpoint (masqueraded)", nsClient, hostPort(f.nodeIP, 30091), f.inside, "pod-b",
			func(a netip.Addr) bool { return a == f.nodeToB }},
		{"node to a cluster IP whose endpoint is remote (masqueraded)", nsNode, hostPort(f.clusterIP, 80), netip.Addr{}, "pod-b",
			func(a netip.Addr) bool { return a == f.nodeToB }},
		{"pod to itself through its service (hairpin, masqueraded)", "sy-pod-a", hostPort(f.selfIP, 80), netip.Addr{}, "pod-a",
			func(a netip.Addr) bool { return a == f.nodeToA }},
	}
	for _, c := range checks {
		conn, err := dial(c.ns, c.src, c.dst)
		if err != nil {
			t.Errorf("%s: %s: %v", f.family, c.what, err)
			continue
		}
		if conn.Pod != c.pod || !c.seen(conn.Source) {
			t.Errorf("%s: %s: reached %s, seen from %s", f.family, c.what, conn.Pod, conn.Source)
		}
		conn.reset()
	}
}

// dialRefused checks that a connection from src to dst does not open:
// loadBalancerSourceRanges drops the SYN, so the bound is the verdict.
func dialRefused(ns string, src netip.Addr, dst string) error {
	var c net.Conn
	err := kerneltest.InNetns(ns, func() error {
		d := net.Dialer{Timeout: 1500 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		var err error
		c, err = d.Dial("tcp", dst)
		return err
	})
	if err == nil {
		c.Close()
		return fmt.Errorf("client %s outside loadBalancerSourceRanges was let through to %s", src, dst)
	}
	return nil
}

// inNode runs a command in the node namespace (as an operator would).
func inNode(args ...string) error { return inNS(nsNode, args...) }

// inNS runs a command in a namespace.
func inNS(ns string, args ...string) error {
	return kerneltest.InNetns(ns, func() error {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	})
}

func inNodeAll(cmds ...[]string) error {
	for _, c := range cmds {
		if err := inNode(c...); err != nil {
			return err
		}
	}
	return nil
}

// firewallReload flushes and deletes every chain of mangle, nat and
// filter in both families, as a firewall reload does.
func firewallReload() error {
	var cmds [][]string
	for _, bin := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"mangle", "nat", "filter"} {
			cmds = append(cmds, []string{bin, "-t", table, "-F"}, []string{bin, "-t", table, "-X"})
		}
	}
	return inNodeAll(cmds...)
}

// vmDamage is one damage of the issue, done to the node as an operator or
// another program would, with the repair kinds it must be counted under.
type vmDamage struct {
	name  string
	kinds []string // "kind/family" of switchyard_ipvs_state_repaired_total
	do    func(t *testing.T) error
}

func vmDamages() []vmDamage {
	delAddr := func(ip string) func(t *testing.T) error {
		return func(t *testing.T) error {
			return inNode("ip", "addr", "del", netip.PrefixFrom(netip.MustParseAddr(ip), netip.MustParseAddr(ip).BitLen()).String(), "dev", sy.DummyInterface)
		}
	}
	return []vmDamage{
		{"iptables flushed and chains deleted", []string{"iptables/ipv4", "iptables/ipv6"}, func(*testing.T) error { return firewallReload() }},
		{"one ipset flushed", []string{"ipset/ipv4", "ipset/ipv6"}, func(*testing.T) error {
			return inNodeAll([]string{"ipset", "flush", "KUBE-LOOP-BACK"}, []string{"ipset", "flush", "KUBE-6-LOOP-BACK"})
		}},
		// The kernel refuses to destroy a set a rule uses: that rule goes
		// first (as after a firewall reload).
		{"one ipset destroyed", []string{"ipset/ipv4", "iptables/ipv4"}, func(*testing.T) error {
			return inNodeAll([]string{"iptables", "-F", "KUBE-SOURCE-RANGES-FIREWALL"}, []string{"ipset", "destroy", "KUBE-LOAD-BALANCER-FW"})
		}},
		{"kube-ipvs0 deleted", []string{"interface/ipv4", "interface/ipv6"}, func(*testing.T) error {
			return inNode("ip", "link", "del", sy.DummyInterface)
		}},
		{"one address removed from kube-ipvs0", []string{"interface/ipv4"}, delAddr("198.51.100.90")},
		{"one IPv6 address removed from kube-ipvs0", []string{"interface/ipv6"}, delAddr("fd00:10:96::91")},
		{"one virtual server deleted", []string{"virtual_server/ipv4", "virtual_server/ipv6"}, func(*testing.T) error {
			return inNodeAll([]string{"ipvsadm", "-D", "-t", vmNodeIP + ":30091"}, []string{"ipvsadm", "-D", "-t", "[" + vmNodeIP6 + "]:30091"})
		}},
		{"one real server deleted", []string{"real_server/ipv4", "real_server/ipv6"}, func(*testing.T) error {
			return inNodeAll([]string{"ipvsadm", "-d", "-t", "10.96.0.90:80", "-r", "10.244.2.2:8080"},
				[]string{"ipvsadm", "-d", "-t", "[fd00:10:96::91]:80", "-r", "[fd00:10:244:1::2]:8080"})
		}},
	}
}

// testRepairs: one dual-stack backend; for each damage, one verifying
// sync, then the traffic of both families is checked and the repair
// counted. A verifying sync of the repaired node writes nothing to IPVS.
func testRepairs(t *testing.T, vk *vmKernel) {
	reg := prometheus.NewPedanticRegistry()
	b, err := sy.New(sy.Config{Kernel: vk.k, Families: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
		LocalDetector: proxier.DetectByClusterCIDRs(clusterCIDR, netip.MustParsePrefix("fd00:10:244::/48")), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Cleanup(context.Background()); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
	})
	st := repairState()
	sync := func(diff *proxier.Diff) {
		t.Helper()
		if _, err := b.Sync(context.Background(), st, diff); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	sync(nil)
	for _, f := range repairFamilies() {
		checkTraffic(t, f)
	}
	if t.Failed() {
		t.Fatalf("traffic wrong before any damage")
	}
	for _, d := range vmDamages() {
		t.Run(d.name, func(t *testing.T) {
			before := repairCounts(t, reg)
			if err := d.do(t); err != nil {
				t.Fatalf("damage: %v", err)
			}
			start := time.Now()
			sync(&proxier.Diff{Verify: true})
			t.Logf("verifying sync with repair: %v", time.Since(start).Round(time.Millisecond))
			for _, f := range repairFamilies() {
				checkTraffic(t, f)
			}
			after := repairCounts(t, reg)
			for _, k := range d.kinds {
				if after[k] != before[k]+1 {
					t.Errorf("repairs %s: %v -> %v, want one more (all: %v)", k, before[k], after[k], after)
				}
			}
			vk.rec.writes = nil
			sync(&proxier.Diff{Verify: true})
			if len(vk.rec.writes) != 0 || !maps.Equal(repairCounts(t, reg), after) {
				t.Errorf("a verifying sync after the repair wrote IPVS %v or counted repairs %v", vk.rec.writes, repairCounts(t, reg))
			}
		})
	}
}

// repairCounts reads switchyard_ipvs_state_repaired_total by "kind/family".
func repairCounts(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_ipvs_state_repaired_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["kind"]+"/"+l["family"]] = m.GetCounter().GetValue()
		}
	}
	return out
}
