package nftables

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	gnft "github.com/google/nftables"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
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
		w := nfnetlink.NewBatch()
		b := &batch{fam: tc.fam, table: &gnft.Table{Name: TableName}, wire: w, flush: func() error { return nil }}
		tx := ruleset.NewTransaction(tc.fam, TableName)
		tx.AddElements(tc.set, tc.els)
		if err := b.elements(&tx.Ops[0]); err != nil {
			t.Fatal(err)
		}
		msgs, err := syscall.ParseNetlinkMessage(w.Bytes())
		w.Release()
		if err != nil || len(msgs) != 2 {
			t.Fatalf("%s: %d messages, %v", tc.set.Name, len(msgs), err)
		}
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
		if err := r.message(msgs[1].Data[4:]); err != nil {
			t.Fatalf("%s: decoding: %v", tc.set.Name, err)
		}
		if err := r.pair(); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.els, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
			t.Errorf("%s %s: read back differs (-written +read):\n%s", tc.fam, tc.set.Name, d)
		}
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
