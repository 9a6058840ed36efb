package explain

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipvstest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// lbService is webService as a LoadBalancer with an LB IP and source
// ranges.
func lbService(s *v1.Service) {
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24"}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.50"}}
}

// TestIPVSReportMatchesBackend: for every address, the endpoints explain
// reaches are exactly the weighted real servers of the virtual server
// the backend programmed for it, with rr's equal shares.
func TestIPVSReportMatchesBackend(t *testing.T) {
	o := objects(webService(lbService), slice("web-1", eps(3, "node-b")))
	k := syncIPVS(t, o, "rr")
	rep := Build(o, readIPVSFakes(t, o, k), noIface)
	if n := rep.Problems(); n != 0 {
		t.Fatalf("%d problems:\n%s", n, text(rep, true))
	}
	checks := rep.Ports[0].Checks
	if len(checks) != 3 {
		t.Fatalf("checks: %+v", checks)
	}
	for _, c := range checks {
		vs, ok := k.IPVS.Lookup(0, string(c.Probe.Protocol), netip.AddrPortFrom(c.Probe.Dst, c.Probe.Port))
		if !ok {
			t.Fatalf("%s: the backend programmed no virtual server", c.Kind)
		}
		var programmed, reached []netip.AddrPort
		for _, r := range vs.Reals {
			programmed = append(programmed, r.Addr)
		}
		for _, s := range c.Reached {
			reached = append(reached, s.Endpoint)
			if math.Abs(s.Probability-1.0/3) > 1e-9 || !s.Masquerade {
				t.Errorf("%s: %+v, want 1/3 masqueraded", c.Kind, s)
			}
		}
		if !slices.Equal(programmed, reached) {
			t.Errorf("%s: reached %v, programmed %v", c.Kind, reached, programmed)
		}
	}
}

// TestIPVSDiffers: the API gained an endpoint after the last sync, and
// a real server was deleted by hand: both are missing in the kernel, and
// the remaining real servers share the connections.
func TestIPVSDiffers(t *testing.T) {
	synced := objects(webService(), slice("web-1", eps(3, "node-b")))
	k := syncIPVS(t, synced, "rr")
	svc := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Address: netip.MustParseAddr("10.96.0.10").AsSlice(), Port: 80}
	gone := &ipvs.Destination{AddressFamily: syscall.AF_INET, Address: netip.MustParseAddr("10.244.1.3").AsSlice(), Port: 8080}
	if err := k.IPVS.DelDestination(svc, gone); err != nil {
		t.Fatal(err)
	}
	now := objects(webService(), slice("web-1", eps(4, "node-b")))
	rep := Build(now, readIPVSFakes(t, now, k), noIface)
	cluster, nodePort := rep.Ports[0].Checks[0], rep.Ports[0].Checks[1]
	if got := addrPorts(cluster.Missing); got != "10.244.1.3:8080, 10.244.1.4:8080" {
		t.Errorf("cluster IP missing %q", got)
	}
	if got := addrPorts(nodePort.Missing); got != "10.244.1.4:8080" {
		t.Errorf("NodePort missing %q", got)
	}
	for _, s := range cluster.Reached {
		if math.Abs(s.Probability-0.5) > 1e-9 {
			t.Errorf("cluster IP %+v, want 50%%", s)
		}
	}
	out := text(rep, false)
	for _, want := range []string{"missing in the kernel: 10.244.1.3:8080, 10.244.1.4:8080", "2 of 2 addresses differ", "IPVS TCP 10.96.0.10:80 (rr): round-robin"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestIPVSSchedulersAndWeights: weights give the shares, weight 0 drains
// (no new connection, named), the scheduler and persistence are told.
func TestIPVSSchedulersAndWeights(t *testing.T) {
	svc := webService(func(s *v1.Service) {
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptrInt32(600)}}
	})
	o := objects(svc, slice("web-1", eps(3, "node-b")))
	k := syncIPVS(t, o, "wrr")
	vsHandle := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Address: netip.MustParseAddr("10.96.0.10").AsSlice(), Port: 80}
	for ip, w := range map[string]int{"10.244.1.1": 3, "10.244.1.3": 0} {
		d := &ipvs.Destination{AddressFamily: syscall.AF_INET, Address: netip.MustParseAddr(ip).AsSlice(), Port: 8080, Weight: w}
		if err := k.IPVS.UpdateDestination(vsHandle, d); err != nil {
			t.Fatal(err)
		}
	}
	rep := Build(o, readIPVSFakes(t, o, k), noIface)
	c := rep.Ports[0].Checks[0]
	want := map[string]float64{"10.244.1.1:8080": 0.75, "10.244.1.2:8080": 0.25}
	if len(c.Reached) != 2 {
		t.Fatalf("reached %+v", c.Reached)
	}
	for _, s := range c.Reached {
		if math.Abs(s.Probability-want[s.Endpoint.String()]) > 1e-9 {
			t.Errorf("%+v, want %v", s, want[s.Endpoint.String()])
		}
	}
	if c.AffinitySeconds != 600 || addrPorts(c.Missing) != "10.244.1.3:8080" {
		t.Errorf("affinity %d, missing %v", c.AffinitySeconds, c.Missing)
	}
	out := text(rep, false)
	for _, want := range []string{"weighted round-robin", "persistent for 600s", "draining (weight 0, no new connection): 10.244.1.3:8080"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// TestIPVSShares: each scheduler's shares over the same weights.
func TestIPVSShares(t *testing.T) {
	dests := []realServer{{Weight: 1}, {Weight: 3}, {Weight: 0}}
	cases := map[string][]float64{
		"rr": {0.5, 0.5, 0}, "lc": {0.5, 0.5, 0}, "wrr": {0.25, 0.75, 0}, "wlc": {0.25, 0.75, 0},
		"sh": {0.25, 0.75, 0}, "fo": {0, 1, 0}, "mystery": {0.25, 0.75, 0},
	}
	for sched, want := range cases {
		vs := virtualServer{Scheduler: sched, Dests: dests}
		got, note := vs.shares()
		if !slices.Equal(got, want) || note == "" {
			t.Errorf("%s: %v %q, want %v", sched, got, note, want)
		}
	}
}

// TestIPVSNoVirtualServer: a virtual server deleted by hand leaves the
// address to the node's own sockets: nothing is load-balanced.
func TestIPVSNoVirtualServer(t *testing.T) {
	o := objects(webService(), slice("web-1", eps(2, "node-b")))
	k := syncIPVS(t, o, "rr")
	h := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP, Address: netip.MustParseAddr("10.96.0.10").AsSlice(), Port: 80}
	if err := k.IPVS.DelService(h); err != nil {
		t.Fatal(err)
	}
	rep := Build(o, readIPVSFakes(t, o, k), noIface)
	c := rep.Ports[0].Checks[0]
	if c.OK() || !c.Untouched || len(c.Missing) != 2 {
		t.Errorf("check %+v", c)
	}
	if out := text(rep, false); !strings.Contains(out, "no IPVS virtual server for 10.96.0.10:80/TCP: not load-balanced") {
		t.Errorf("report:\n%s", out)
	}
}

// TestIPVSFirewall: the companion rules' verdicts, through their sets:
// REJECT without endpoints, DROP outside loadBalancerSourceRanges.
func TestIPVSFirewall(t *testing.T) {
	o := objects(webService(lbService), slice("web-1", eps(2, "node-b")))
	dp := readIPVSFakes(t, o, syncIPVS(t, o, "rr"))
	lb := Probe{Src: Outsider4, Dst: netip.MustParseAddr("192.0.2.50"), Port: 80, Protocol: v1.ProtocolTCP, InInterface: "eth0"}
	paths, err := dp.Trace(lb)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0].Verdict != "drop" || !slices.ContainsFunc(paths[0].Rules, func(r string) bool { return strings.Contains(r, "KUBE-LOAD-BALANCER-FW") }) {
		t.Errorf("LB IP from outside the source ranges: %+v", paths)
	}
	empty := objects(webService(), slice("web-1", nil))
	rep := Build(empty, readIPVSFakes(t, empty, syncIPVS(t, empty, "rr")), noIface)
	for _, c := range rep.Ports[0].Checks {
		if !c.OK() || c.Refused != 1 || !slices.Contains(c.Verdicts, "reject") {
			t.Errorf("%s without endpoints: %+v", c.Kind, c)
		}
	}
}

// failingSets cannot be read.
type failingSets struct{}

func (failingSets) Save(context.Context) ([]byte, error) {
	return nil, errors.New("ipset: command not found")
}

// TestIPVSSetsUnreadable: without the sets, a trace that reaches a set
// match says so instead of guessing.
func TestIPVSSetsUnreadable(t *testing.T) {
	o := objects(webService(), slice("web-1", eps(2, "node-b")))
	k := syncIPVS(t, o, "rr")
	dp, err := ReadIPVS(context.Background(), IPVSConfig{IPVS: k.IPVS, IPSets: failingSets{}, IPTables: k.IPTables,
		Families: o.Families, Local: slices.Concat([]netip.Addr{testNodeIP}, k.Netlink.AllAddresses())})
	if err != nil {
		t.Fatal(err)
	}
	rep := Build(o, dp, noIface)
	out := text(rep, false)
	if rep.Problems() != 2 || !strings.Contains(out, "cannot trace") || !strings.Contains(out, "ipset: command not found") {
		t.Errorf("report:\n%s", out)
	}
}

// TestIPVSReadOnly: reading and tracing changes nothing in the fakes.
func TestIPVSReadOnly(t *testing.T) {
	o := objects(webService(lbService), slice("web-1", eps(2, "node-b")))
	k := syncIPVS(t, o, "rr")
	k.IPVS.ResetOps()
	k.Netlink.ResetOps()
	restores, before := len(k.IPSet.Restores()), dumpFakes(k)
	Build(o, readIPVSFakes(t, o, k), noIface)
	if ops := k.IPVS.Ops(); len(ops) != 0 {
		t.Errorf("IPVS changed: %v", ops)
	}
	if len(k.Netlink.Ops()) != 0 || len(k.IPSet.Restores()) != restores || dumpFakes(k) != before {
		t.Errorf("the fake node changed")
	}
}

func dumpFakes(k *ipvstest.Kernel) string {
	return k.IPVS.Dump() + k.IPTables.DumpAll(runner.IPv4) + strings.Join(k.IPSet.Names(), ",")
}
