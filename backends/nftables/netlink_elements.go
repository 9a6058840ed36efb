package nftables

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// elementReader decodes a set's dump.
type elementReader struct {
	fam ruleset.Family
	set *ruleset.Set
	fn  func(*ruleset.Element)
	// scratch is the element handed to fn, its values reused.
	scratch ruleset.Element
	verdict ruleset.Verdict
	count   ruleset.ElementCounter
	// starts and ends collect an interval set's elements.
	starts []startElement
	ends   []uint32
}

func (r *elementReader) message(attrs []byte) error {
	return nfnetlink.ParseElements(attrs, r.element)
}

// element decodes one element; an interval's start or end is kept for
// pair, anything else handed to fn.
func (r *elementReader) element(x *nfnetlink.Element) error {
	e := &r.scratch
	e.Key, e.Data, e.Verdict, e.Tag, e.Counter = e.Key[:0], e.Data[:0], nil, nil, nil
	if x.Key == nil {
		return fmt.Errorf("an element without a key")
	}
	var err error
	if e.Key, err = decodeData(r.fam, r.set.Key, x.Key, e.Key); err != nil {
		return err
	}
	if err := r.data(x); err != nil {
		return err
	}
	if x.Userdata != nil {
		e.Tag = parseTag(x.Userdata)
	}
	if r.set.Counter {
		r.counter(x)
	}
	switch {
	case x.IntervalEnd:
		r.ends = append(r.ends, e.Key[0].Num)
	case r.set.Interval:
		r.starts = append(r.starts, startElement{start: e.Key[0].Num, to: endpointOf(e)})
	default:
		r.fn(e)
	}
	return nil
}

// data decodes an element's verdict or data values.
func (r *elementReader) data(x *nfnetlink.Element) error {
	e := &r.scratch
	switch {
	case r.set.Kind == ruleset.VerdictMap && x.Verdict != nil:
		r.verdict = ruleset.Verdict{Kind: nfnetlink.VerdictName(x.Verdict.Code), Chain: x.Verdict.Chain}
		e.Verdict = &r.verdict
	case r.set.Kind == ruleset.VerdictMap && x.Data != nil:
		return fmt.Errorf("no verdict in element data")
	case r.set.Kind != ruleset.VerdictMap && (x.Data != nil || x.Verdict != nil):
		var err error
		e.Data, err = decodeData(r.fam, r.set.Data, x.Data, e.Data)
		return err
	}
	return nil
}

// counter sets up the scratch element's counter from the element's
// comment and counter expression, when it has either.
func (r *elementReader) counter(x *nfnetlink.Element) {
	if x.Userdata == nil && x.Counter == nil {
		return
	}
	r.count = ruleset.ElementCounter{}
	if x.Userdata != nil {
		r.count.Comment = parseComment(x.Userdata)
	}
	if x.Counter != nil {
		r.count.Packets, r.count.Bytes = x.Counter.Packets, x.Counter.Bytes
	}
	r.scratch.Counter = &r.count
}

// startElement is an endpoint map's start element, waiting for its end.
type startElement struct {
	start uint32
	to    netip.AddrPort
}

// pair hands out each interval start with its range's last value.
func (r *elementReader) pair() error {
	slices.SortFunc(r.starts, func(a, b startElement) int { return int64Cmp(a.start, b.start) })
	slices.Sort(r.ends)
	e := &r.scratch
	j := 0
	for _, iv := range r.starts {
		for j < len(r.ends) && r.ends[j] <= iv.start {
			j++
		}
		if j == len(r.ends) {
			return fmt.Errorf("interval from %d has no end", iv.start)
		}
		e.Key = append(e.Key[:0], ruleset.Value{Num: iv.start})
		e.KeyEnd = append(e.KeyEnd[:0], ruleset.Value{Num: r.ends[j] - 1})
		e.Data = append(e.Data[:0], ruleset.Value{Addr: iv.to.Addr()}, ruleset.Value{Num: uint32(iv.to.Port())})
		e.Verdict = nil
		r.fn(e)
	}
	return nil
}

func int64Cmp(a, b uint32) int { return int(int64(a) - int64(b)) }

// decodeData reads a key's or data's value as the values of fields fs
// (the inverse of appendValues), into out.
func decodeData(fam ruleset.Family, fs ruleset.Fields, value []byte, out []ruleset.Value) ([]ruleset.Value, error) {
	if len(value) != fs.Len(fam) {
		return out, fmt.Errorf("%d bytes for %s (%d expected)", len(value), fs.Text(fam), fs.Len(fam))
	}
	for _, fl := range fs {
		var v ruleset.Value
		switch fl {
		case ruleset.FieldSaddr, ruleset.FieldDaddr:
			if fam.AddrLen() == 4 {
				v.Addr = netip.AddrFrom4([4]byte(value[:4]))
			} else {
				v.Addr = netip.AddrFrom16([16]byte(value[:16]))
			}
			value = value[fam.AddrLen():]
			out = append(out, v)
			continue
		case ruleset.FieldL4Proto:
			v.Num = uint32(value[0])
		case ruleset.FieldDport:
			v.Num = uint32(value[0])<<8 | uint32(value[1])
		default:
			v.Num = binary.BigEndian.Uint32(value)
		}
		value = value[4:]
		out = append(out, v)
	}
	return out, nil
}
