package ruleset

import (
	"math"
	"net/netip"
	"testing"
)

// traceTable: a cluster IP 10.96.0.10:80 whose chain picks one of three
// endpoints with numgen rules, and one 10.96.0.20:80 whose endpoint group
// gives 3/4 of its slots to one endpoint.
func traceTable() *Table {
	t := NewTable(IPv4, "kube-proxy")
	ep := func(s string) DNATTo { return DNATTo{Endpoint: netip.MustParseAddrPort(s)} }
	dst := func(ip string) Cmp { return Cmp{Field: FieldDaddr, Prefix: netip.MustParsePrefix(ip + "/32")} }
	t.Chains["nat-output"] = &Chain{Name: "nat-output", Hook: &Hook{Type: "nat", Hook: "output", Priority: -100},
		Rules: []Rule{R(dst("10.96.0.10"), Do{Kind: "jump", Chain: "svc-web"}), R(dst("10.96.0.20"), DNAT{Map: "endpoints-0"})}}
	t.Chains["svc-web"] = &Chain{Name: "svc-web", Rules: []Rule{
		R(NumgenIs{Mod: 3}, ep("10.244.1.1:8080")), R(NumgenIs{Mod: 2}, ep("10.244.1.2:8080")), R(ep("10.244.1.3:8080")),
	}}
	m := &Set{Name: "endpoints-0", Kind: DataMap, Key: Fields{FieldSlot}, Data: Fields{FieldDaddr, FieldDport}, Interval: true}
	slot := func(a, b uint32, ip string) Element {
		return Element{Key: []Value{{Num: a}}, KeyEnd: []Value{{Num: b}}, Data: []Value{{Addr: netip.MustParseAddr(ip)}, {Num: 8080}}}
	}
	t.Sets[m.Name] = &SetState{Set: m, Elements: map[string]Element{
		"0": slot(0, 3*SlotSpace/4-1, "10.244.2.1"), "1": slot(3*SlotSpace/4, SlotSpace-1, "10.244.2.2"),
	}}
	return t
}

func TestTraceProbabilities(t *testing.T) {
	for _, tc := range []struct {
		dst  string
		want map[string]float64
	}{
		{"10.96.0.10", map[string]float64{"10.244.1.1:8080": 1.0 / 3, "10.244.1.2:8080": 1.0 / 3, "10.244.1.3:8080": 1.0 / 3}},
		{"10.96.0.20", map[string]float64{"10.244.2.1:8080": 0.75, "10.244.2.2:8080": 0.25}},
	} {
		p := Packet{Saddr: netip.MustParseAddr("192.168.0.1"), Daddr: netip.MustParseAddr(tc.dst), L4Proto: ProtoTCP, Dport: 80}
		res, err := traceTable().Trace(p, []netip.Addr{p.Saddr}, true)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, path := range res.Paths {
			if path.Verdict != "accept" || len(path.Rules) == 0 {
				t.Errorf("%s: path %+v", tc.dst, path)
			}
			got[path.DNAT.String()] += path.Probability
		}
		for ep, w := range tc.want {
			if math.Abs(got[ep]-w) > 1e-9 {
				t.Errorf("%s: %s has probability %v, want %v (all: %v)", tc.dst, ep, got[ep], w, got)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: reaches %v, want %v", tc.dst, got, tc.want)
		}
	}
}
