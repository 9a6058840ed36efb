package ipvs_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestFirstSyncProgramsEverything(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080", "10.244.2.3:8080@", "10.244.2.4:8080!")
	res := e.sync(nil)
	if !res.Full {
		t.Errorf("first sync not reported full")
	}
	if diff := cmp.Diff([]string{"10.244.1.2:8080/1", "10.244.2.3:8080/1"}, e.reals("TCP/10.96.0.10:80")); diff != "" {
		t.Errorf("real servers (-want +got):\n%s", diff)
	}
	vs, _ := e.k.IPVS.Service("TCP/10.96.0.10:80")
	if vs.Scheduler != "rr" || vs.Persistent || vs.Reals[0].ConnectionFlags != ipvs.ConnectionFlagMasq {
		t.Errorf("virtual server %+v: want rr, not persistent, masquerading", vs)
	}
	if got := e.k.Netlink.Addresses(sy.DummyInterface); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.96.0.10")}) {
		t.Errorf("kube-ipvs0 addresses = %v", got)
	}
	if got := e.k.IPSet.Entries("KUBE-CLUSTER-IP"); !slices.Equal(got, []string{"10.96.0.10,tcp:80"}) {
		t.Errorf("KUBE-CLUSTER-IP = %v", got)
	}
	wantLoop := []string{"10.244.1.2,tcp:8080,10.244.1.2", "10.244.2.3,tcp:8080,10.244.2.3"}
	if got := e.k.IPSet.Entries("KUBE-LOOP-BACK"); !slices.Equal(got, wantLoop) {
		t.Errorf("KUBE-LOOP-BACK = %v, want %v", got, wantLoop)
	}
	nat := e.k.IPTables.Dump("ipv4", "nat")
	for _, want := range []string{
		`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`,
		`-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`,
	} {
		if !strings.Contains(nat, want+"\n") {
			t.Errorf("nat table lacks %q:\n%s", want, nat)
		}
	}
}

func TestReconcileChangesOnlyWhatDiffers(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	db := e.svc("db", "10.96.0.20", 5432)
	e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080")
	e.eps(db, "10.244.1.9:5432")
	e.sync(nil)
	steps := []struct {
		name    string
		change  func()
		diff    *proxier.Diff
		wantOps []string
	}{
		{"nothing changed", func() {}, changed(), nil},
		{"endpoint added", func() { e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080", "10.244.1.4:8080") }, changed(web),
			[]string{"NewDestination TCP/10.96.0.10:80 10.244.1.4:8080 weight=1"}},
		{"endpoint without connections removed", func() { e.eps(web, "10.244.1.2:8080", "10.244.1.4:8080") }, changed(web),
			[]string{"DelDestination TCP/10.96.0.10:80 10.244.1.3:8080"}},
		{"affinity turned on", func() { e.state.Services[web].AffinityTimeoutSeconds = 600 }, changed(web),
			[]string{"UpdateService TCP/10.96.0.10:80 rr"}},
		{"service deleted", func() { delete(e.state.Services, db); delete(e.state.Endpoints, db) }, changed(db),
			[]string{"DelService TCP/10.96.0.20:5432"}},
		{"full resync of a clean node", func() {}, full(), nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.change()
			e.k.IPVS.ResetOps()
			if res := e.sync(s.diff); res.Full != s.diff.Full {
				t.Errorf("sync reported full=%v for a diff with Full=%v", res.Full, s.diff.Full)
			}
			if diff := cmp.Diff(s.wantOps, e.k.IPVS.Ops()); diff != "" {
				t.Errorf("IPVS calls (-want +got):\n%s", diff)
			}
		})
	}
	if got := e.k.Netlink.Addresses(sy.DummyInterface); !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.96.0.10")}) {
		t.Errorf("addresses after db went: %v", got)
	}
	if got := e.k.IPSet.Entries("KUBE-CLUSTER-IP"); !slices.Equal(got, []string{"10.96.0.10,tcp:80"}) {
		t.Errorf("KUBE-CLUSTER-IP after db went: %v", got)
	}
	vs, _ := e.k.IPVS.Service("TCP/10.96.0.10:80")
	if !vs.Persistent || vs.Timeout != 600 || vs.Netmask != 0xffffffff {
		t.Errorf("affinity: %+v", vs)
	}
}

func TestPartialSyncLeavesOtherServersAlone(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	db := e.svc("db", "10.96.0.20", 5432)
	e.eps(web, "10.244.1.2:8080")
	e.eps(db, "10.244.1.9:5432")
	e.sync(nil)
	// Drift the kernel behind the backend's back: a foreign service and a
	// real server missing from db.
	foreign := &ipvs.Service{AddressFamily: 2, Protocol: 6, Address: netip.MustParseAddr("10.96.9.9").AsSlice(), Port: 9, SchedName: "rr"}
	if err := e.k.IPVS.Add(foreign); err != nil {
		t.Fatal(err)
	}
	dbKey := &ipvs.Service{AddressFamily: 2, Protocol: 6, Address: netip.MustParseAddr("10.96.0.20").AsSlice(), Port: 5432}
	if err := e.k.IPVS.DelDestination(dbKey, &ipvs.Destination{Address: netip.MustParseAddr("10.244.1.9").AsSlice(), Port: 5432}); err != nil {
		t.Fatal(err)
	}
	e.k.IPVS.ResetOps()
	e.eps(web, "10.244.1.2:8080", "10.244.1.5:8080")
	if res := e.sync(changed(web)); res.Full {
		t.Errorf("partial sync reported full")
	}
	want := []string{"NewDestination TCP/10.96.0.10:80 10.244.1.5:8080 weight=1"}
	if diff := cmp.Diff(want, e.k.IPVS.Ops()); diff != "" {
		t.Errorf("partial sync touched more than web (-want +got):\n%s", diff)
	}
	e.k.IPVS.ResetOps()
	e.sync(full())
	want = []string{"NewDestination TCP/10.96.0.20:5432 10.244.1.9:5432 weight=1", "DelService TCP/10.96.9.9:9"}
	if diff := cmp.Diff(want, e.k.IPVS.Ops(), sortStrings()); diff != "" {
		t.Errorf("full sync repair (-want +got):\n%s", diff)
	}
	for _, op := range e.k.IPVS.Ops() {
		if strings.Contains(op, "Flush") {
			t.Errorf("flushed: %s", op)
		}
	}
}

func sortStrings() cmp.Option {
	return cmp.Transformer("sort", func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return out
	})
}

func TestAddressesFollowServices(t *testing.T) {
	e := newEnv(t)
	a := e.svc("a", "10.96.0.10", 80, func(sp *proxier.ServicePort) {
		sp.ExternalIPs = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
		sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.1")}
	})
	// a second port of the same service shares the cluster IP
	b := e.svc("a", "10.96.0.10", 443, func(sp *proxier.ServicePort) { sp.Name.Port = "https" })
	e.eps(a, "10.244.1.2:80")
	e.eps(b, "10.244.1.2:443")
	e.sync(nil)
	want := []string{"10.96.0.10", "192.0.2.1", "198.51.100.1"}
	if got := addrStrings(e.k.Netlink.Addresses(sy.DummyInterface)); !slices.Equal(got, want) {
		t.Fatalf("addresses = %v, want %v", got, want)
	}
	delete(e.state.Services, a)
	e.sync(changed(a))
	if got := addrStrings(e.k.Netlink.Addresses(sy.DummyInterface)); !slices.Equal(got, []string{"10.96.0.10"}) {
		t.Errorf("after port a went: %v (the cluster IP is still used by port https)", got)
	}
	delete(e.state.Services, b)
	e.sync(changed(b))
	if got := e.k.Netlink.Addresses(sy.DummyInterface); len(got) != 0 {
		t.Errorf("after the service went: %v", got)
	}
}

func addrStrings(as []netip.Addr) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.String())
	}
	return out
}

func TestTerminatingEndpointsFollowTheSelection(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	// No ready endpoint: the serving-terminating ones are used (KEP-1669).
	e.eps(web, "10.244.1.2:8080~", "10.244.1.3:8080~", "10.244.1.4:8080!")
	e.sync(nil)
	if diff := cmp.Diff([]string{"10.244.1.2:8080/1", "10.244.1.3:8080/1"}, e.reals("TCP/10.96.0.10:80")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestNodePorts(t *testing.T) {
	second := netip.MustParseAddr("10.0.0.10")
	e := newEnv(t, func(c *sy.Config) { c.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/24")} })
	e.state.Node.Addresses = []netip.Addr{nodeIP, second}
	np := e.svc("np", "10.96.0.30", 80, func(sp *proxier.ServicePort) { sp.NodePort = 30080 })
	e.eps(np, "10.244.1.2:8080")
	e.sync(nil)
	if got := e.reals("TCP/192.168.0.10:30080"); !slices.Equal(got, []string{"10.244.1.2:8080/1"}) {
		t.Errorf("NodePort on the node address: %v", got)
	}
	if got := e.reals("TCP/10.0.0.10:30080"); got != nil {
		t.Errorf("NodePort outside --nodeport-addresses: %v", got)
	}
	if got := e.k.IPSet.Entries("KUBE-NODE-PORT-TCP"); !slices.Equal(got, []string{"30080"}) {
		t.Errorf("KUBE-NODE-PORT-TCP = %v", got)
	}
	// The node's address changes: the NodePort moves, whatever the diff.
	e.state.Node.Addresses = []netip.Addr{netip.MustParseAddr("192.168.0.11")}
	if res := e.sync(changed()); !res.Full {
		t.Errorf("a node address change did not force a full sync")
	}
	if e.reals("TCP/192.168.0.10:30080") != nil || e.reals("TCP/192.168.0.11:30080") == nil {
		t.Errorf("NodePort did not follow the node address:\n%s", e.k.IPVS.Dump())
	}
}

func TestSchedulers(t *testing.T) {
	for _, s := range []string{"", "rr", "lc", "dh", "sh", "wrr", "wlc", "sed", "nq", "mh"} {
		t.Run("scheduler "+s, func(t *testing.T) {
			e := newEnv(t, func(c *sy.Config) { c.Scheduler = s })
			web := e.svc("web", "10.96.0.10", 80)
			e.eps(web, "10.244.1.2:8080")
			e.sync(nil)
			want := s
			if want == "" {
				want = "rr"
			}
			if vs, _ := e.k.IPVS.Service("TCP/10.96.0.10:80"); vs.Scheduler != want {
				t.Errorf("scheduler = %q, want %q", vs.Scheduler, want)
			}
		})
	}
	k := newEnv(t).k
	if _, err := sy.New(sy.Config{Kernel: k.Kernel, Scheduler: "random"}); err == nil {
		t.Errorf("New accepted scheduler \"random\"")
	}
}

func TestUDPAndIPv6(t *testing.T) {
	e := newEnv(t, func(c *sy.Config) {
		c.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		c.LocalDetector.ClusterCIDRs = append(c.LocalDetector.ClusterCIDRs, netip.MustParsePrefix("fd00:10:244::/48"))
	})
	dns := spn("dns", v1.ProtocolUDP)
	e.state.Services[dns] = &proxier.ServicePort{Name: dns, Protocol: v1.ProtocolUDP, Port: 53,
		ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.53"), netip.MustParseAddr("fd00:10:96::53")}}
	e.eps(dns, "10.244.1.7:53", "[fd00:10:244:1::7]:53")
	e.sync(nil)
	if got := e.reals("UDP/10.96.0.53:53"); !slices.Equal(got, []string{"10.244.1.7:53/1"}) {
		t.Errorf("IPv4: %v", got)
	}
	if got := e.reals("UDP/[fd00:10:96::53]:53"); !slices.Equal(got, []string{"[fd00:10:244:1::7]:53/1"}) {
		t.Errorf("IPv6: %v", got)
	}
	if got := e.k.IPSet.Entries("KUBE-6-CLUSTER-IP"); !slices.Equal(got, []string{"fd00:10:96::53,udp:53"}) {
		t.Errorf("KUBE-6-CLUSTER-IP = %v", got)
	}
	if !strings.Contains(e.k.IPTables.Dump("ipv6", "nat"), "KUBE-6-CLUSTER-IP") {
		t.Errorf("IPv6 rules do not use the IPv6 sets")
	}
}

// TestExcludeCIDRs: virtual servers and kube-ipvs0 addresses on
// --ipvs-exclude-cidrs survive full syncs and --cleanup; others go.
func TestExcludeCIDRs(t *testing.T) {
	e := newEnv(t, func(c *sy.Config) { c.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")} })
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080")
	e.sync(nil)
	keepalived := &ipvs.Service{AddressFamily: 2, Protocol: 6, Address: netip.MustParseAddr("192.0.2.7").AsSlice(), Port: 443, SchedName: "wrr"}
	stale := &ipvs.Service{AddressFamily: 2, Protocol: 6, Address: netip.MustParseAddr("10.96.9.9").AsSlice(), Port: 9, SchedName: "rr"}
	for _, s := range []*ipvs.Service{keepalived, stale} {
		if err := e.k.IPVS.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"192.0.2.7", "10.96.9.9"} {
		if err := e.k.Netlink.AddAddress(sy.DummyInterface, netip.MustParseAddr(a)); err != nil {
			t.Fatal(err)
		}
	}
	e.k.IPVS.ResetOps()
	e.sync(full())
	if diff := cmp.Diff([]string{"DelService TCP/10.96.9.9:9"}, e.k.IPVS.Ops()); diff != "" {
		t.Errorf("full sync (-want +got):\n%s", diff)
	}
	want := []netip.Addr{netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("192.0.2.7")}
	if got := e.k.Netlink.Addresses(sy.DummyInterface); !slices.Equal(got, want) {
		t.Errorf("kube-ipvs0 addresses after a full sync: %v, want %v", got, want)
	}
	if err := e.b.Cleanup(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.k.IPVS.Service("TCP/192.0.2.7:443"); !ok {
		t.Error("--cleanup deleted the excluded virtual server")
	}
	if _, ok := e.k.IPVS.Service("TCP/10.96.0.10:80"); ok {
		t.Error("--cleanup left web's virtual server")
	}
}
