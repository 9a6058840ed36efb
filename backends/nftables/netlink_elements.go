package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// ReadElements implements Conn: one dump of the set, decoded a datagram
// at a time into one scratch element. An interval set's start and end
// elements (the kernel keeps them apart) are paired once the dump is
// read: each start with the lowest end above it, as intervals never
// overlap.
func (n *NetlinkConn) ReadElements(_ context.Context, fam ruleset.Family, table string, s *ruleset.Set, fn func(*ruleset.Element)) error {
	r := &elementReader{fam: fam, set: s, fn: fn}
	err := n.dumpEach(unix.NFT_MSG_GETSETELEM, fam, []dumpAttr{
		{unix.NFTA_SET_ELEM_LIST_TABLE, table}, {unix.NFTA_SET_ELEM_LIST_SET, s.Name},
	}, r.message)
	if err == nil {
		err = r.err
	}
	if err == nil {
		err = r.pair()
	}
	if err != nil {
		return fmt.Errorf("reading back set %s of %s %s: %w", s.Name, fam, table, err)
	}
	return nil
}

// elementReader decodes a set's dump.
type elementReader struct {
	fam ruleset.Family
	set *ruleset.Set
	fn  func(*ruleset.Element)
	err error
	// scratch is the element handed to fn, its values reused.
	scratch ruleset.Element
	verdict ruleset.Verdict
	count   ruleset.ElementCounter
	// starts and ends collect an interval set's elements.
	starts []startElement
	ends   []uint32
}

func (r *elementReader) message(attrs []byte) error {
	return eachAttr(attrs, func(typ uint16, v []byte) {
		if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
			return
		}
		err := eachAttr(v, func(typ uint16, elem []byte) {
			if typ == unix.NFTA_LIST_ELEM && r.err == nil {
				r.err = r.element(elem)
			}
		})
		if r.err == nil {
			r.err = err
		}
	})
}

// element decodes one element; an interval's start or end is kept for
// pair, anything else handed to fn.
func (r *elementReader) element(b []byte) error {
	e := &r.scratch
	e.Key, e.Data, e.Verdict, e.Tag, e.Counter = e.Key[:0], e.Data[:0], nil, nil, nil
	end := false
	var err error
	walkErr := eachAttr(b, func(typ uint16, v []byte) {
		switch typ {
		case unix.NFTA_SET_ELEM_KEY:
			e.Key, err = decodeData(r.fam, r.set.Key, v, e.Key)
		case unix.NFTA_SET_ELEM_FLAGS:
			end = len(v) == 4 && binary.BigEndian.Uint32(v)&unix.NFT_SET_ELEM_INTERVAL_END != 0
		case unix.NFTA_SET_ELEM_USERDATA:
			e.Tag = parseTag(v)
			if r.set.Counter {
				r.counter().Comment = parseComment(v)
			}
		case unix.NFTA_SET_ELEM_EXPR, nftaSetElemExpressions:
			if r.set.Counter {
				err = decodeCounter(typ, v, r.counter())
			}
		case unix.NFTA_SET_ELEM_DATA:
			if r.set.Kind == ruleset.VerdictMap {
				e.Verdict, err = decodeVerdict(v, &r.verdict)
			} else {
				e.Data, err = decodeData(r.fam, r.set.Data, v, e.Data)
			}
		}
	})
	switch {
	case walkErr != nil:
		return walkErr
	case err != nil:
		return err
	case len(e.Key) == 0:
		return fmt.Errorf("an element without a key")
	case end:
		r.ends = append(r.ends, e.Key[0].Num)
	case r.set.Interval:
		r.starts = append(r.starts, startElement{start: e.Key[0].Num, to: endpointOf(e)})
	default:
		r.fn(e)
	}
	return nil
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

// decodeData reads the NFTA_DATA_VALUE of a nested data attribute as the
// values of fields fs (the inverse of appendValues), into out.
func decodeData(fam ruleset.Family, fs ruleset.Fields, nested []byte, out []ruleset.Value) ([]ruleset.Value, error) {
	var value []byte
	if err := eachAttr(nested, func(typ uint16, v []byte) {
		if typ == unix.NFTA_DATA_VALUE {
			value = v
		}
	}); err != nil {
		return out, err
	}
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

// decodeVerdict reads a verdict map element's verdict into v.
func decodeVerdict(nested []byte, v *ruleset.Verdict) (*ruleset.Verdict, error) {
	*v = ruleset.Verdict{}
	err := eachAttr(nested, func(typ uint16, b []byte) {
		if typ != unix.NFTA_DATA_VERDICT {
			return
		}
		_ = eachAttr(b, func(typ uint16, b []byte) {
			switch typ {
			case unix.NFTA_VERDICT_CODE:
				if len(b) == 4 {
					v.Kind = verdictName(int32(binary.BigEndian.Uint32(b)))
				}
			case unix.NFTA_VERDICT_CHAIN:
				v.Chain = string(trimNUL(b))
			}
		})
	})
	if err != nil {
		return nil, err
	}
	if v.Kind == "" {
		return nil, fmt.Errorf("no verdict in element data")
	}
	return v, nil
}

func verdictName(code int32) string {
	switch code {
	case unix.NFT_JUMP:
		return "jump"
	case unix.NFT_GOTO:
		return "goto"
	case unix.NFT_RETURN:
		return "return"
	case 0:
		return "drop"
	case 1:
		return "accept"
	}
	return fmt.Sprintf("verdict %d", code)
}

// counter is the scratch element's counter, set up on first use.
func (r *elementReader) counter() *ruleset.ElementCounter {
	if r.scratch.Counter == nil {
		r.count = ruleset.ElementCounter{}
		r.scratch.Counter = &r.count
	}
	return r.scratch.Counter
}

// decodeCounter reads the counts of an element's counter expression: the
// kernel dumps one expression as NFTA_SET_ELEM_EXPR, several as a list in
// NFTA_SET_ELEM_EXPRESSIONS.
func decodeCounter(typ uint16, b []byte, c *ruleset.ElementCounter) error {
	if typ == nftaSetElemExpressions {
		var err error
		walk := eachAttr(b, func(t uint16, v []byte) {
			if t == unix.NFTA_LIST_ELEM && err == nil {
				err = decodeCounter(unix.NFTA_SET_ELEM_EXPR, v, c)
			}
		})
		return errors.Join(walk, err)
	}
	var name string
	var data []byte
	if err := eachAttr(b, func(t uint16, v []byte) {
		switch t {
		case unix.NFTA_EXPR_NAME:
			name = string(trimNUL(v))
		case unix.NFTA_EXPR_DATA:
			data = v
		}
	}); err != nil || name != "counter" {
		return err
	}
	return eachAttr(data, func(t uint16, v []byte) {
		if len(v) != 8 {
			return
		}
		switch t {
		case unix.NFTA_COUNTER_PACKETS:
			c.Packets = binary.BigEndian.Uint64(v)
		case unix.NFTA_COUNTER_BYTES:
			c.Bytes = binary.BigEndian.Uint64(v)
		}
	})
}

// nftaSetElemExpressions is the kernel's NFTA_SET_ELEM_EXPRESSIONS (5.11),
// which x/sys/unix lacks.
const nftaSetElemExpressions = 0xb
