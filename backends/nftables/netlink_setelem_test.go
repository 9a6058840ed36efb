package nftables

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	gnft "github.com/google/nftables"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// TestElementsRoundTrip writes elements of every kind of set switchyard
// has (a verdict map with tags, an interval map, a plain set of
// concatenated addresses, IPv4 and IPv6) as the batch lays them out, and
// reads them back as the read-back decodes a dump: each comes back as
// written, an interval's start and end paired again. (The kernel tests
// check both against the kernel.)
func TestElementsRoundTrip(t *testing.T) {
	tag := &ruleset.ChainTag{Print: 0x1234567890abcdef, Groups: []ruleset.GroupRef{{ID: 70000, Width: 128}, {ID: 3, Width: 128, Local: true}}}
	for _, tc := range []struct {
		fam ruleset.Family
		set *ruleset.Set
		els []ruleset.Element
	}{
		{ruleset.IPv4, &ruleset.Set{Name: "vm", Kind: ruleset.VerdictMap, Key: keyDst}, []ruleset.Element{
			{Key: vals(netip.MustParseAddr("10.96.0.10"), 6, 53), Verdict: &ruleset.Verdict{Kind: "goto", Chain: "service-X"}, Tag: tag},
			{Key: vals(netip.MustParseAddr("10.96.0.11"), 17, 53), Verdict: &ruleset.Verdict{Kind: "goto", Chain: "external-Y"}},
		}},
		{ruleset.IPv6, &ruleset.Set{Name: "vm6", Kind: ruleset.VerdictMap, Key: keyDst}, []ruleset.Element{
			{Key: vals(netip.MustParseAddr("fd00::a"), 132, 8080), Verdict: &ruleset.Verdict{Kind: "goto", Chain: "service-Z"}, Tag: tag},
		}},
		{ruleset.IPv4, endpointMapSet("endpoints-0"), []ruleset.Element{
			{Key: []ruleset.Value{{Num: 65536}}, KeyEnd: []ruleset.Value{{Num: 98303}}, Data: vals(netip.MustParseAddr("10.244.1.2"), 8080)},
			{Key: []ruleset.Value{{Num: 98304}}, KeyEnd: []ruleset.Value{{Num: 131071}}, Data: vals(netip.MustParseAddr("10.244.1.3"), 8081)},
		}},
		{ruleset.IPv6, &ruleset.Set{Name: "hp", Key: keyHairpin}, []ruleset.Element{
			{Key: vals(netip.MustParseAddr("fd00::1:2"), netip.MustParseAddr("fd00::1:2"))},
		}},
	} {
		b := &batch{fam: tc.fam, table: &gnft.Table{Name: TableName}}
		list := b.beginElements(tc.set.Name)
		for i := range tc.els {
			b.element(tc.set, &tc.els[i], true)
		}
		endNest(b.msg, list)
		var got []ruleset.Element
		r := &elementReader{fam: tc.fam, set: tc.set, fn: func(e *ruleset.Element) {
			c := *e
			c.Key, c.KeyEnd, c.Data = clone(e.Key), clone(e.KeyEnd), clone(e.Data)
			if e.Verdict != nil {
				v := *e.Verdict
				c.Verdict = &v
			}
			got = append(got, c)
		}}
		if err := r.message(b.msg[4:]); err != nil || r.err != nil {
			t.Fatalf("%s: decoding: %v %v", tc.set.Name, err, r.err)
		}
		if err := r.pair(); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.els, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
			t.Errorf("%s %s: read back differs (-written +read):\n%s", tc.fam, tc.set.Name, d)
		}
	}
}

// TestElementMessagesSplit: an operation larger than one message is cut
// into messages of at most maxElementsPerMessage kernel elements, an
// interval never split from its end.
func TestElementMessagesSplit(t *testing.T) {
	s := endpointMapSet("endpoints-0")
	var els []ruleset.Element
	for i := range uint32(maxElementsPerMessage) {
		els = append(els, ruleset.Element{Key: []ruleset.Value{{Num: 2 * i}}, KeyEnd: []ruleset.Value{{Num: 2*i + 1}}, Data: vals(netip.MustParseAddr("10.0.0.1"), 80)})
	}
	w := newWire()
	defer w.release()
	b := &batch{fam: ruleset.IPv4, table: &gnft.Table{Name: TableName}, wire: w, flush: func() error { return nil }}
	tx := ruleset.NewTransaction(ruleset.IPv4, TableName)
	tx.AddElements(s, els)
	if err := b.elements(&tx.Ops[0]); err != nil {
		t.Fatal(err)
	}
	if w.msgs != 2 {
		t.Errorf("%d intervals (%d kernel elements) in %d messages, want 2", len(els), 2*len(els), w.msgs)
	}
}

// TestElementMessagesSplitBySize: 512 service-ips elements of IPv6
// services (a 24-byte key, a long chain name, a tag) exceed 64 KiB: they
// go in more than one message, each list within netlink's 16-bit length.
func TestElementMessagesSplitBySize(t *testing.T) {
	s := &ruleset.Set{Name: setServiceIPs, Kind: ruleset.VerdictMap, Key: keyDst}
	var els []ruleset.Element
	for i := range maxElementsPerMessage {
		chain := fmt.Sprintf("service-ABCDEFGH-a-long-namespace-name.a-long-service-name-%05d.tcp.https", i)
		els = append(els, ruleset.Element{Key: vals(netip.MustParseAddr(fmt.Sprintf("fd00:10:96::%x", i)), 6, 443),
			Verdict: &ruleset.Verdict{Kind: "goto", Chain: chain}, Tag: &ruleset.ChainTag{Print: ruleset.ChainPrint(i)}})
	}
	w := newWire()
	defer w.release()
	b := &batch{fam: ruleset.IPv6, table: &gnft.Table{Name: TableName}, wire: w, flush: func() error { return nil }}
	tx := ruleset.NewTransaction(ruleset.IPv6, TableName)
	tx.AddElements(s, els)
	if err := b.elements(&tx.Ops[0]); err != nil {
		t.Fatal(err)
	}
	if w.msgs < 2 {
		t.Errorf("%d elements of ~%d bytes in %d message", len(els), 130, w.msgs)
	}
}

func vals(vs ...any) []ruleset.Value {
	out := make([]ruleset.Value, len(vs))
	for i, v := range vs {
		switch v := v.(type) {
		case netip.Addr:
			out[i].Addr = v
		case int:
			out[i].Num = uint32(v)
		}
	}
	return out
}

func clone(vs []ruleset.Value) []ruleset.Value {
	if vs == nil {
		return nil
	}
	return append([]ruleset.Value(nil), vs...)
}
