package nftablestest

import (
	"net/netip"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// Rejection is a transaction the kernel refuses: Setup is committed
// first, then Bad must fail and change nothing. The fake's tests and a
// kernel test run the same list, so the fake is held to the kernel.
type Rejection struct {
	Name  string
	Setup func(tx *ruleset.Transaction)
	Bad   func(tx *ruleset.Transaction)
}

var (
	testKey  = ruleset.Fields{ruleset.FieldDaddr, ruleset.FieldL4Proto, ruleset.FieldDport}
	testSet  = &ruleset.Set{Name: "s", Key: testKey}
	testVmap = &ruleset.Set{Name: "v", Kind: ruleset.VerdictMap, Key: testKey}
	testPool = &ruleset.Set{Name: "p", Kind: ruleset.DataMap, Interval: true,
		Key: ruleset.Fields{ruleset.FieldSlot}, Data: ruleset.Fields{ruleset.FieldDaddr, ruleset.FieldDport}}
)

func element(ip string) ruleset.Element {
	return ruleset.Element{Key: []ruleset.Value{{Addr: netip.MustParseAddr(ip)}, {Num: ruleset.ProtoTCP}, {Num: 80}}}
}

func slots(lo, hi uint32) ruleset.Element {
	return ruleset.Element{Key: []ruleset.Value{{Num: lo}}, KeyEnd: []ruleset.Value{{Num: hi}},
		Data: []ruleset.Value{{Addr: netip.MustParseAddr("10.0.0.1")}, {Num: 80}}}
}

func base(tx *ruleset.Transaction) {
	tx.AddTable()
	tx.AddChain(&ruleset.Chain{Name: "a"})
	tx.AddChain(&ruleset.Chain{Name: "b"})
	tx.AddSet(testSet)
	tx.AddSet(testVmap)
	tx.AddSet(testPool)
}

// Rejections lists what the backend must never send.
func Rejections() []Rejection {
	return []Rejection{
		{"jump to a missing chain", base, func(tx *ruleset.Transaction) {
			tx.AddRule("a", ruleset.R(ruleset.Do{Kind: "jump", Chain: "missing"}))
		}},
		{"lookup in a missing set", base, func(tx *ruleset.Transaction) {
			tx.AddRule("a", ruleset.R(ruleset.Lookup{Key: testKey, Set: "missing"}))
		}},
		{"vmap on a plain set", base, func(tx *ruleset.Transaction) {
			tx.AddRule("a", ruleset.R(ruleset.VMap{Key: testKey, Map: "s"}))
		}},
		{"delete a chain a rule jumps to", func(tx *ruleset.Transaction) {
			base(tx)
			tx.AddRule("a", ruleset.R(ruleset.Do{Kind: "jump", Chain: "b"}))
		}, func(tx *ruleset.Transaction) { tx.DeleteChain("b") }},
		{"delete a chain a map element names", func(tx *ruleset.Transaction) {
			base(tx)
			e := element("10.96.0.1")
			e.Verdict = &ruleset.Verdict{Kind: "goto", Chain: "b"}
			tx.AddElements(testVmap, []ruleset.Element{e})
		}, func(tx *ruleset.Transaction) { tx.DeleteChain("b") }},
		{"delete a set a rule uses", func(tx *ruleset.Transaction) {
			base(tx)
			tx.AddRule("a", ruleset.R(ruleset.Lookup{Key: testKey, Set: "s"}))
		}, func(tx *ruleset.Transaction) { tx.DeleteSet("s") }},
		{"map element naming a missing chain", base, func(tx *ruleset.Transaction) {
			e := element("10.96.0.2")
			e.Verdict = &ruleset.Verdict{Kind: "goto", Chain: "missing"}
			tx.AddElements(testVmap, []ruleset.Element{e})
		}},
		{"delete a missing element", base, func(tx *ruleset.Transaction) {
			tx.DeleteElements(testSet, []ruleset.Element{element("10.96.0.3")})
		}},
		{"overlapping interval", func(tx *ruleset.Transaction) {
			base(tx)
			tx.AddElements(testPool, []ruleset.Element{slots(0, 99)})
		}, func(tx *ruleset.Transaction) { tx.AddElements(testPool, []ruleset.Element{slots(50, 149)}) }},
		{"valid operations before a bad one are not kept", base, func(tx *ruleset.Transaction) {
			tx.AddElements(testSet, []ruleset.Element{element("10.96.0.4")})
			tx.AddRule("a", ruleset.R(ruleset.Do{Kind: "goto", Chain: "missing"}))
		}},
	}
}
