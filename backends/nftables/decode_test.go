package nftables_test

import (
	"testing"

	"github.com/google/nftables/expr"

	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestDecodeEveryRule: every rule a full sync of the flow fixture writes,
// under every local-traffic detector, compiled and taken through the wire
// encoding as the kernel would answer it, decodes back to itself
// (ruleset.Decode, which `switchyard explain` reads the kernel with).
func TestDecodeEveryRule(t *testing.T) {
	flowtest.RunDetectors(t, func(t *testing.T, state *proxier.State, node flowtest.NodeConfig) flowtest.Model {
		fake := nftablestest.NewFake()
		mustSync(t, flowBackend(t, fake, node), state, fullDiff())
		for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
			tbl := fake.Table(fam, "kube-proxy")
			for _, c := range tbl.Chains {
				for _, r := range c.Rules {
					checkDecode(t, fam, r)
				}
			}
		}
		return nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs}
	})
}

func checkDecode(t *testing.T, fam ruleset.Family, r ruleset.Rule) {
	t.Helper()
	compiled, err := r.Compile(fam)
	if err != nil {
		t.Fatal(err)
	}
	kernel := make([]expr.Any, 0, len(compiled))
	for _, e := range compiled {
		kernel = append(kernel, wireTrip(t, fam, e))
	}
	got, err := ruleset.Decode(fam, kernel)
	if err != nil {
		t.Errorf("%s: %s: %v", fam, r.Text(fam), err)
		return
	}
	if g, w := ruleset.R(got...).Text(fam), ruleset.R(r.Exprs...).Text(fam); g != w {
		t.Errorf("%s: decoded %q, want %q", fam, g, w)
	}
}

// wireTrip encodes an expression as it is sent and decodes it as a dump
// would be.
func wireTrip(t *testing.T, fam ruleset.Family, e expr.Any) expr.Any {
	t.Helper()
	proto := byte(2)
	if fam == ruleset.IPv6 {
		proto = 10
	}
	data, err := expr.MarshalExprData(proto, e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ruleset.ParseExpr(fam, ruleset.ExprName(e), data)
	if err != nil {
		t.Fatalf("%T: %v", e, err)
	}
	return back
}

// TestDecodeRefusesForeignRules: a rule no switchyard renderer writes
// (here a masquerade with a hashed random port) does not decode.
func TestDecodeRefusesForeignRules(t *testing.T) {
	for _, in := range [][]expr.Any{
		{&expr.Masq{Random: true}},
		{&expr.Counter{}},
		{&expr.Meta{Key: expr.MetaKeyMARK, Register: 8}},
	} {
		if got, err := ruleset.Decode(ruleset.IPv4, in); err == nil {
			t.Errorf("%v decoded to %v", in, got)
		}
	}
}
