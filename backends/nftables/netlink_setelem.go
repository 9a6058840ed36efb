package nftables

import (
	"encoding/binary"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// elements writes an element operation into the wire
// (nfnetlink.Batch.Elements), after the messages google/nftables holds.
func (b *batch) elements(o *ruleset.Op) error {
	if err := b.flush(); err != nil {
		return err
	}
	add := o.Kind == ruleset.OpAddElements
	return b.wire.Elements(nfproto(b.fam), b.table.Name, o.Name, add, len(o.Elements), func(i int) *nfnetlink.Element {
		return b.element(o.Set, &o.Elements[i], add)
	})
}

// element lays one element out in the batch's scratch element: its
// values as the registers hold them (appendValues), an interval's end
// one past its last value, an addition's data and tag.
func (b *batch) element(s *ruleset.Set, e *ruleset.Element, add bool) *nfnetlink.Element {
	b.key = appendValues(b.key[:0], s.Key, e.Key)
	x := &b.scratch
	*x = nfnetlink.Element{Key: b.key}
	if e.KeyEnd != nil {
		b.end = binary.BigEndian.AppendUint32(b.end[:0], e.KeyEnd[0].Num+1)
		x.End = b.end
	}
	if !add {
		return x
	}
	switch {
	case e.Verdict != nil:
		b.verdict = nfnetlink.Verdict{Code: nfnetlink.VerdictCode(e.Verdict.Kind), Chain: e.Verdict.Chain}
		x.Verdict = &b.verdict
	case len(e.Data) > 0:
		b.data = appendValues(b.data[:0], s.Data, e.Data)
		x.Data = b.data
	}
	if e.Tag != nil {
		x.Userdata = tagUserdata(e.Tag)
	} else if e.Counter != nil && e.Counter.Comment != "" {
		x.Userdata = commentUserdata(e.Counter.Comment)
	}
	return x
}
