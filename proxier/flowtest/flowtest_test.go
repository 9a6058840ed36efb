package flowtest

import (
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestCaseNamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Cases() {
		if seen[c.Name] {
			t.Errorf("duplicate case %q", c.Name)
		}
		seen[c.Name] = true
		if c.Packet.Name != c.Name {
			t.Errorf("case %q: packet named %q", c.Name, c.Packet.Name)
		}
	}
}

// servicePortsFor finds the fixture's service ports a packet is addressed
// to (by cluster, external or load-balancer IP, or node IP and NodePort).
func servicePortsFor(state *proxier.State, node NodeConfig, p Packet) []*proxier.ServicePort {
	var out []*proxier.ServicePort
	for _, sp := range state.Services {
		if sp.Protocol != p.Protocol {
			continue
		}
		vips := slices.Concat(sp.ClusterIPs, sp.ExternalIPs, sp.LoadBalancerIPs)
		if sp.Port == p.DstPort && slices.Contains(vips, p.DstIP) ||
			sp.NodePort != 0 && sp.NodePort == p.DstPort && slices.Contains(node.NodeIPs, p.DstIP) {
			out = append(out, sp)
		}
	}
	return out
}

// TestTableMatchesFixture checks the table's bookkeeping against the
// fixture (not its semantics): packets expected to do something address
// exactly one service port, and expected endpoints are endpoints of it.
func TestTableMatchesFixture(t *testing.T) {
	state, node := Fixture()
	for _, c := range Cases() {
		sps := servicePortsFor(state, node, c.Packet)
		noEffect := !c.Expect.Drop && !c.Expect.Reject && len(c.Expect.Endpoints) == 0
		if noEffect != (len(sps) == 0) || len(sps) > 1 {
			t.Errorf("%q: addresses %d service ports, expects an effect: %v", c.Name, len(sps), !noEffect)
			continue
		}
		for _, want := range c.Expect.Endpoints {
			if !slices.ContainsFunc(state.Endpoints[sps[0].Name], func(e proxier.Endpoint) bool { return e.String() == want }) {
				t.Errorf("%q: %s is no endpoint of %s", c.Name, want, sps[0].Name)
			}
		}
	}
}

func TestFixtureIsWellFormed(t *testing.T) {
	state, node := Fixture()
	if node.MasqueradeAll || len(node.NodeIPs) != 2 || len(node.LocalDetector.ClusterCIDRs) != 2 {
		t.Errorf("node config: %+v", node)
	}
	for name, sp := range state.Services {
		if sp.Name != name {
			t.Errorf("service %s keyed as %s", sp.Name, name)
		}
		eps := state.Endpoints[name]
		if !slices.IsSortedFunc(eps, func(a, b proxier.Endpoint) int { return a.Key().Compare(b.Key()) }) {
			t.Errorf("%s: endpoints not sorted", name)
		}
		for _, e := range eps {
			if e.IsLocal != (e.NodeName == node.NodeName) {
				t.Errorf("%s: endpoint %s IsLocal=%v on node %s", name, e, e.IsLocal, e.NodeName)
			}
		}
	}
	// Fresh each call: a caller may not change another's state.
	other, _ := Fixture()
	for k := range other.Services {
		delete(other.Services, k)
	}
	if again, _ := Fixture(); len(again.Services) != len(state.Services) {
		t.Errorf("Fixture shares state between calls")
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name      string
		want, got Expect
		same      bool
	}{
		{"endpoints compare as sets", reach("b:1", "a:1"), Expect{Endpoints: []string{"a:1", "b:1"}, MasqChecked: true}, true},
		{"missing endpoint", reach("a:1", "b:1"), reach("a:1"), false},
		{"masquerade compared when both check it", masq("a:1"), reach("a:1"), false},
		{"model without masquerade skips it", masq("a:1"), Expect{Endpoints: []string{"a:1"}}, true},
		{"case without masquerade skips it", drop(), Expect{Drop: true, Masquerade: true, MasqChecked: true}, true},
		{"nil and empty endpoints agree", nothing(), Expect{Endpoints: []string{}, MasqChecked: true}, true},
		{"reject is not drop", reject(), drop(), false},
	}
	for _, tc := range tests {
		if d := Diff(tc.want, tc.got); (d == "") != tc.same {
			t.Errorf("%s: Diff = %q, want same=%v", tc.name, d, tc.same)
		}
	}
}

// TestDetectorOverridesNameVariants: an override keyed by a name that is
// no variant would never be checked.
func TestDetectorOverridesNameVariants(t *testing.T) {
	names := map[string]bool{}
	for _, v := range Variants() {
		names[v.Name] = true
		if err := v.Local.Validate(); err != nil {
			t.Errorf("variant %s: %v", v.Name, err)
		}
	}
	overridden := 0
	for _, c := range Cases() {
		for name := range c.ByDetector {
			overridden++
			if !names[name] {
				t.Errorf("%q: override for unknown variant %q", c.Name, name)
			}
		}
	}
	if overridden == 0 {
		t.Error("no case depends on the detector")
	}
	// Pods of this node send through the variant's pod interface.
	for _, v := range Variants() {
		for _, c := range CasesFor(v) {
			if c.Packet.SrcIP.String() == podClient && c.Packet.InInterface != v.PodInterface {
				t.Errorf("%s/%q: pod packet in on %q", v.Name, c.Name, c.Packet.InInterface)
			}
		}
	}
}
