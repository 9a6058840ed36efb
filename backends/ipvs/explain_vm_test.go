package ipvs_test

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/switchyard-proxy/switchyard/internal/explain"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelExplain runs explain's ipvs reader against the real kernel
// after a real sync (the topology of TestKernel) and compares what it
// says with where real connections land: from the node to the cluster
// IP, from an outside client to the NodePort (masqueraded or not), a
// Service without endpoints, an endpoint the API gained after the sync
// and a real server deleted by hand. Explain must change nothing.
func TestKernelExplain(t *testing.T) {
	requireVM(t)
	buildTopology(t)
	vk := openVMKernel(t)
	v := vk.backend(t, "rr")
	synced := explainObjects(append(webWithEndpoints(podA, podB), emptyService())...)
	if _, err := v.b.Sync(context.Background(), synced.state(), &proxier.Diff{Full: true}); err != nil {
		t.Fatal(err)
	}
	before := kernelSnapshot(t, vk)
	rep := explainReport(t, vk, synced)
	t.Logf("explain:\n%s", reportText(rep))
	checkAgainstConnections(t, rep)
	if n := problems(rep); n != 0 {
		t.Errorf("%d problems after a sync", n)
	}

	now := explainObjects(append(webWithEndpoints(podA, podB, proxier.Endpoint{IP: netip.MustParseAddr("10.244.3.2"), Port: 8080}), emptyService())...)
	rep = explainReport(t, vk, now)
	t.Logf("explain, the API gained 10.244.3.2 after the sync:\n%s", reportText(rep))
	for _, c := range portChecks(rep, "web") {
		if !slices.Equal(c.Missing, []netip.AddrPort{netip.MustParseAddrPort("10.244.3.2:8080")}) {
			t.Errorf("%s: missing %v", c.Kind, c.Missing)
		}
	}
	checkAgainstConnections(t, rep)

	deleteRealServer(t, vk, "10.96.0.10:80", podB)
	rep = explainReport(t, vk, synced)
	t.Logf("explain, pod-b deleted from the cluster IP by hand:\n%s", reportText(rep))
	c := portChecks(rep, "web")[0]
	if c.Kind != explain.KindClusterIP || len(c.Reached) != 1 || c.Reached[0].Probability != 1 || len(c.Missing) != 1 {
		t.Errorf("cluster IP after the deletion: %+v", c)
	}
	checkAgainstConnections(t, rep)
	if after := kernelSnapshot(t, vk); after != before {
		t.Errorf("explain changed the kernel:\n%s\n---\n%s", before, after)
	}
}

// webWithEndpoints is the NodePort Service web (10.96.0.10:80, NodePort
// 30080, target 8080) and its slice.
func webWithEndpoints(eps ...proxier.Endpoint) []any {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
		Ports: []v1.ServicePort{{Name: "p", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}}}
	sl := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To(int32(8080)), Protocol: ptr.To(v1.ProtocolTCP)}}}
	for _, e := range eps {
		node := "node-b"
		if e.IsLocal {
			node = "node-a"
		}
		sl.Endpoints = append(sl.Endpoints, discovery.Endpoint{Addresses: []string{e.IP.String()}, NodeName: ptr.To(node),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}})
	}
	return []any{svc, sl}
}

func emptyService() any {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}, Spec: v1.ServiceSpec{
		Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
		Ports: []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP}}}}
}

// explainObjects are two Services' objects; explain.State of them is
// what the backend syncs (both Services: State takes Objects' Service,
// so the empty one is added by hand).
type twoServices struct {
	web, empty explain.Objects
}

func explainObjects(objs ...any) twoServices {
	web, sl, empty := objs[0].(*v1.Service), objs[1].(*discovery.EndpointSlice), objs[2].(*v1.Service)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: vmNodeIP}}}}
	o := func(s *v1.Service, sls ...*discovery.EndpointSlice) explain.Objects {
		return explain.Objects{Service: s, Slices: sls, Node: node, NodeName: "node-a", Families: []v1.IPFamily{v1.IPv4Protocol}}
	}
	return twoServices{web: o(web, sl), empty: o(empty)}
}

// state is what the daemon would sync for both Services.
func (ts twoServices) state() *proxier.State {
	st := explain.State(ts.web)
	other := explain.State(ts.empty)
	for n, sp := range other.Services {
		st.Services[n], st.Endpoints[n] = sp, other.Endpoints[n]
	}
	return st
}

// explainReport reads the node as `switchyard explain` does in ipvs
// mode and reports on both Services. (Exists is left out: the sync made
// the filter and nat tables, and the legacy check reads the calling
// thread's namespace, not sy-node's.)
func explainReport(t *testing.T, vk *vmKernel, ts twoServices) []explain.Report {
	t.Helper()
	addrs, err := nlHandle(t, nsNode).AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var local []netip.Addr
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		local = append(local, ip.Unmap())
	}
	dp, err := explain.ReadIPVS(context.Background(), explain.IPVSConfig{IPVS: vk.k.IPVS, IPSets: vk.k.IPSet,
		IPTables: vk.k.IPTables, Families: []v1.IPFamily{v1.IPv4Protocol}, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	viaClient := func(netip.Addr) string { return "veth-c" }
	return []explain.Report{explain.Build(ts.web, dp, viaClient), explain.Build(ts.empty, dp, viaClient)}
}

func reportText(reps []explain.Report) string {
	var b strings.Builder
	for _, r := range reps {
		r.Write(&b, false)
	}
	return b.String()
}

func problems(reps []explain.Report) int {
	n := 0
	for _, r := range reps {
		n += r.Problems()
	}
	return n
}

// portChecks are the checks of the named Service's only port.
func portChecks(reps []explain.Report, name string) []explain.CheckResult {
	for _, r := range reps {
		if r.Service.Service.Name == name {
			return r.Ports[0].Checks
		}
	}
	return nil
}

// podEndpoint maps a pod server's name to its endpoint.
var podEndpoint = map[string]netip.AddrPort{
	"pod-a": netip.MustParseAddrPort("10.244.1.2:8080"),
	"pod-b": netip.MustParseAddrPort("10.244.2.2:8080"),
}

// checkAgainstConnections makes real connections to every address
// explain checked (the node's own from sy-node, the others from the
// outside client) and compares: the endpoints that answer are exactly
// the ones explain names (every one of them reached over 8 rr
// connections), the client address they see says whether explain's
// "masqueraded" holds, and an address explain says is refused refuses.
func checkAgainstConnections(t *testing.T, reps []explain.Report) {
	t.Helper()
	for _, name := range []string{"web", "empty"} {
		for _, c := range portChecks(reps, name) {
			ns, src := nsClient, outsider
			if c.Probe.FromNode {
				ns, src = nsNode, netip.MustParseAddr(vmNodeIP)
			}
			compareConnections(t, c, ns, src, netip.AddrPortFrom(c.Probe.Dst, c.Probe.Port).String())
		}
	}
}

func compareConnections(t *testing.T, c explain.CheckResult, ns string, src netip.Addr, dst string) {
	t.Helper()
	if c.Refused == 1 {
		if conn, err := dial(ns, src, dst); err == nil {
			conn.Close()
			t.Errorf("%s %s: explain says refused, a connection reached %s", c.Kind, dst, conn.Pod)
		}
		return
	}
	// The node's own connections are masqueraded on loopback, before
	// IPVS, to an address the kernel picks (it may be the node's own):
	// only arriving connections show masquerading to the server.
	seen := !c.Probe.FromNode
	want := map[netip.AddrPort]bool{}
	for _, s := range c.Reached {
		want[s.Endpoint] = s.Masquerade && seen
	}
	got := map[netip.AddrPort]bool{}
	for range 8 {
		conn, err := dial(ns, src, dst)
		if err != nil {
			t.Fatalf("%s %s from %s: %v", c.Kind, dst, src, err)
		}
		got[podEndpoint[conn.Pod]] = conn.Source != src && seen
		conn.Close()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s %s: connections reached (endpoint: masqueraded) %v, explain says %v", c.Kind, dst, got, want)
	}
}

// deleteRealServer deletes a real server by hand, as an operator's
// `ipvsadm -d` would.
func deleteRealServer(t *testing.T, vk *vmKernel, vip string, ep proxier.Endpoint) {
	t.Helper()
	ap := netip.MustParseAddrPort(vip)
	svc := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Address: ap.Addr().AsSlice(), Port: ap.Port()}
	d := &ipvs.Destination{AddressFamily: syscall.AF_INET, Address: ep.IP.AsSlice(), Port: ep.Port}
	if err := vk.k.IPVS.DelDestination(svc, d); err != nil {
		t.Fatal(err)
	}
}

// counters are packet counters and iptables-save's dated comments.
var counters = regexp.MustCompile(`\[\d+:\d+\]|(?m)^#.*$`)

// kernelSnapshot is the namespace's iptables, ipsets and IPVS services
// (without packet counters and dates).
func kernelSnapshot(t *testing.T, vk *vmKernel) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, table := range []string{"filter", "nat"} {
		data, err := vk.k.IPTables.SaveTable(ctx, runner.IPv4, table)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(counters.ReplaceAll(data, nil))
	}
	sets, err := vk.k.IPSet.Save(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(sets)
	svcs, err := vk.k.IPVS.GetServices()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		fmt.Fprintf(&b, "%v %d %s\n", s.Address, s.Port, s.SchedName)
	}
	return b.String()
}
