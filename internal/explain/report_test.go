package explain

import (
	"math"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func noIface(netip.Addr) string { return "eth0" }

// TestReportAgrees: rules the backends wrote for exactly these objects
// do what the API says, with equal shares.
func TestReportAgrees(t *testing.T) {
	for mode, plane := range planes() {
		t.Run(mode, func(t *testing.T) {
			o := objects(webService(), slice("web-1", eps(3, "node-b")))
			rep := Build(o, plane(t, o), noIface)
			if n := rep.Problems(); n != 0 {
				t.Fatalf("%d problems:\n%s", n, text(rep, true))
			}
			checks := rep.Ports[0].Checks
			if len(checks) != 2 || checks[0].Kind != KindClusterIP || checks[1].Kind != KindNodePort {
				t.Fatalf("checks %+v", checks)
			}
			for _, c := range checks {
				for _, s := range c.Reached {
					if math.Abs(s.Probability-1.0/3) > 1e-4 {
						t.Errorf("%s: %s has %v", c.Kind, s.Endpoint, s.Probability)
					}
				}
			}
		})
	}
}

// TestReportMissingAndExtra: an endpoint the API gained since the sync
// is missing from the kernel; one it lost is extra.
func TestReportMissingAndExtra(t *testing.T) {
	for mode, plane := range planes() {
		t.Run(mode, func(t *testing.T) {
			synced := objects(webService(), slice("web-1", map[string]string{"10.244.1.1": "node-b", "10.244.1.2": "node-b"}))
			dp := plane(t, synced)
			now := objects(webService(), slice("web-1", map[string]string{"10.244.1.2": "node-b", "10.244.1.3": "node-b"}))
			rep := Build(now, dp, noIface)
			c := rep.Ports[0].Checks[0]
			if got := addrPorts(c.Missing); got != "10.244.1.3:8080" {
				t.Errorf("missing %q", got)
			}
			if got := addrPorts(c.Extra); got != "10.244.1.1:8080" {
				t.Errorf("extra %q", got)
			}
			out := text(rep, false)
			for _, want := range []string{"missing in the kernel: 10.244.1.3:8080", "extra in the kernel (not in the API's selection): 10.244.1.1:8080", "DIFFERS"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
		})
	}
}

// TestReportPoliciesAndAffinity: externalTrafficPolicy Local with no
// endpoint on this node drops NodePort traffic from outside while the
// cluster IP still reaches every endpoint; ClientIP affinity shows with
// its timeout.
func TestReportPoliciesAndAffinity(t *testing.T) {
	svc := webService(func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptrInt32(600)}}
	})
	for mode, plane := range planes() {
		t.Run(mode, func(t *testing.T) {
			o := objects(svc, slice("web-1", eps(2, "node-b")))
			rep := Build(o, plane(t, o), noIface)
			if n := rep.Problems(); n != 0 {
				t.Fatalf("%d problems:\n%s", n, text(rep, true))
			}
			cip, np := rep.Ports[0].Checks[0], rep.Ports[0].Checks[1]
			if len(cip.Reached) != 2 || cip.AffinitySeconds != 600 {
				t.Errorf("cluster IP: %+v", cip)
			}
			if np.Refused < 0.999 || len(np.Reached) != 0 {
				t.Errorf("NodePort: %+v", np)
			}
		})
	}
}

// TestReportNoEndpoints: a Service without endpoints is refused, which
// is what the API says.
func TestReportNoEndpoints(t *testing.T) {
	for mode, plane := range planes() {
		t.Run(mode, func(t *testing.T) {
			o := objects(webService())
			rep := Build(o, plane(t, o), noIface)
			c := rep.Ports[0].Checks[0]
			if !c.OK() || c.Refused < 0.999 || c.Verdicts[0] != "reject" {
				t.Errorf("%+v\n%s", c, text(rep, true))
			}
		})
	}
}

// TestReportNothingProgrammed: a Service synced nowhere shows untouched
// addresses and differs.
func TestReportNothingProgrammed(t *testing.T) {
	for mode, plane := range planes() {
		t.Run(mode, func(t *testing.T) {
			other := objects(webService(func(s *v1.Service) { s.Name = "other"; s.Spec.ClusterIPs = []string{"10.96.0.99"} }))
			dp := plane(t, other)
			rep := Build(objects(webService(), slice("web-1", eps(1, "node-b"))), dp, noIface)
			c := rep.Ports[0].Checks[0]
			if !c.Untouched || c.OK() {
				t.Errorf("%+v", c)
			}
			if out := text(rep, false); !strings.Contains(out, "no rule for this address") {
				t.Errorf("output:\n%s", out)
			}
		})
	}
}

func ptrInt32(v int32) *int32 { return &v }

func text(rep Report, verbose bool) string {
	var b strings.Builder
	rep.Write(&b, verbose)
	return b.String()
}

// TestNodePortProbeAddress: the NodePort is probed on the first node
// address --nodeport-addresses lets NodePorts answer on.
func TestNodePortProbeAddress(t *testing.T) {
	o := objects(webService(), slice("web-1", eps(1, "node-b")))
	o.Node.Status.Addresses = append(o.Node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.10"})
	ports, node := Expected(o)
	for _, tc := range []struct {
		allowed []netip.Prefix
		want    string
	}{
		{nil, "192.168.0.10"},
		{[]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, "10.0.0.10"},
		{[]netip.Prefix{netip.MustParsePrefix("fd00::/8")}, "192.168.0.10"}, // no IPv4 restriction
	} {
		env := Env{Node: node, NodePortAddresses: tc.allowed}
		checks := Checks(ports[0], v1.IPv4Protocol, env)
		if got := checks[1].Probe.Dst.String(); checks[1].Kind != KindNodePort || got != tc.want {
			t.Errorf("%v: NodePort probed on %s, want %s", tc.allowed, got, tc.want)
		}
	}
}
