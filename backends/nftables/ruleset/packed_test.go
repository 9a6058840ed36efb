package ruleset

import (
	"net/netip"
	"testing"
)

// TestPackKeyRoundTrip: every key shape switchyard's sets have packs and
// unpacks to itself, and keys that differ pack differently.
func TestPackKeyRoundTrip(t *testing.T) {
	a4, a6 := netip.MustParseAddr("10.96.0.10"), netip.MustParseAddr("fd00::10")
	for _, tc := range []struct {
		fam Family
		fs  Fields
		vs  []Value
	}{
		{IPv4, Fields{FieldDaddr, FieldL4Proto, FieldDport}, []Value{{Addr: a4}, {Num: ProtoTCP}, {Num: 53}}},
		{IPv6, Fields{FieldDaddr, FieldL4Proto, FieldDport}, []Value{{Addr: a6}, {Num: ProtoUDP}, {Num: 53}}},
		{IPv4, Fields{FieldL4Proto, FieldDport}, []Value{{Num: ProtoTCP}, {Num: 30080}}},
		{IPv6, Fields{FieldSaddr, FieldDaddr}, []Value{{Addr: a6}, {Addr: a6}}},
	} {
		packed, ok := PackKey(tc.vs)
		if !ok {
			t.Fatalf("%v does not fit a packed key", tc.vs)
		}
		got, err := UnpackKey(tc.fam, tc.fs, packed)
		if err != nil {
			t.Fatal(err)
		}
		if valuesText(tc.fs, got) != valuesText(tc.fs, tc.vs) || len(got) != len(tc.vs) {
			t.Errorf("%s %s: %v unpacked as %v", tc.fam, tc.fs.Text(tc.fam), tc.vs, got)
		}
		other := append([]Value(nil), tc.vs...)
		other[len(other)-1].Num++
		if other[len(other)-1].Addr.IsValid() {
			other[len(other)-1].Addr = other[len(other)-1].Addr.Next()
		}
		if o, _ := PackKey(other); o == packed {
			t.Errorf("%v and %v pack alike", tc.vs, other)
		}
	}
	a := Value{Addr: a6}
	if _, ok := PackKey([]Value{a, a, a}); ok {
		t.Error("three IPv6 addresses fit a packed key")
	}
	if _, err := UnpackKey(IPv6, Fields{FieldDaddr, FieldDaddr, FieldDaddr}, PackedKey{}); err == nil {
		t.Error("a packed key unpacked as three IPv6 addresses")
	}
}

// TestChainTags: a tag changes with any rule of the chain, with the
// rules' order and with the groups; equal rules give equal tags.
func TestChainTags(t *testing.T) {
	r1 := R(MarkSet{Bit: 0x4000})
	r2 := R(DNAT{Map: "endpoints-0", Offset: 65536, Group: GroupRef{ID: 1, Width: 16}})
	r3 := R(DNAT{Map: "endpoints-0", Offset: 65536, Group: GroupRef{ID: 1, Width: 16, Local: true}})
	base := TagOf(IPv4, []Rule{r1, r2})
	if !base.Equal(TagOf(IPv4, []Rule{r1, r2})) {
		t.Error("equal rules, different tags")
	}
	for name, other := range map[string]*ChainTag{
		"order":  TagOf(IPv4, []Rule{r2, r1}),
		"a rule": TagOf(IPv4, []Rule{r1}),
		"group":  TagOf(IPv4, []Rule{r1, r3}),
		"family": TagOf(IPv6, []Rule{r1, r2}),
	} {
		if base.Equal(other) || base.Key() == other.Key() {
			t.Errorf("another %s, same tag", name)
		}
	}
	if PrintOf(IPv4, nil) != EmptyChain || EmptyChain.Add(0) == PrintOf(IPv4, []Rule{r1}) {
		t.Error("an empty chain's print, or an untagged rule's, matches a rule's")
	}
}
