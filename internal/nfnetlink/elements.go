package nfnetlink

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// Element is one element of a set as nf_tables carries it: key and data
// laid out as the registers hold them.
type Element struct {
	Key []byte
	// End, written only, closes an interval set's element: the first
	// value past the interval, sent as a second kernel element flagged
	// NFT_SET_ELEM_INTERVAL_END.
	End []byte
	// IntervalEnd, read only, marks such a closing element in a dump.
	IntervalEnd bool
	// Data is a data map's value, Verdict a verdict map's.
	Data    []byte
	Verdict *Verdict
	// Userdata is the element's userdata TLVs (NFTA_SET_ELEM_USERDATA).
	Userdata []byte
	// Counter, read only, is set when the element carries expressions:
	// the counts of its counter (zero if none is a counter).
	Counter *Counter
}

// Verdict is a verdict map element's verdict: a code (VerdictCode) and,
// for a jump or goto, a chain.
type Verdict struct {
	Code  int32
	Chain string
}

// Counter is the counts of an element's counter expression.
type Counter struct{ Packets, Bytes uint64 }

// Elements of one message are bounded: its element list is one netlink
// attribute, whose length is 16 bits. An IPv6 endpoint-map element takes
// ~60 bytes, but a service-ips element of an IPv6 service ~130 (a 24-byte
// key, the verdict's chain name, the chain's tag): 512 of those
// overflowed the length, and the kernel, reading a truncated list,
// refused a dual-stack first sync at 10k services with ENOENT. A list is
// closed once it holds MaxElementListBytes, room for one more element of
// any size.
const (
	MaxElementsPerMessage = 512
	MaxElementListBytes   = 0xffff - 4096
)

// Elements writes n elements (elem(i) gives the i-th, which may reuse
// one Element) into the batch as NEWSETELEM messages, or DELSETELEM
// ones when add is false (an element deleted by its key alone), of up to
// MaxElementsPerMessage kernel elements and about MaxElementListBytes; an
// interval is never split from its end.
func (b *Batch) Elements(fam byte, table, set string, add bool, n int, elem func(i int) *Element) error {
	typ, flags := uint16(unix.NFT_MSG_NEWSETELEM), uint16(unix.NLM_F_REQUEST|unix.NLM_F_CREATE)
	if !add {
		typ, flags = unix.NFT_MSG_DELSETELEM, unix.NLM_F_REQUEST
	}
	k, list := 0, b.beginElements(fam, table, set)
	for i := range n {
		e := elem(i)
		size := 1
		if e.End != nil {
			size = 2
		}
		if k > 0 && (k+size > MaxElementsPerMessage || len(b.msg)-list > MaxElementListBytes) {
			if err := b.endElements(list, typ, flags); err != nil {
				return err
			}
			k, list = 0, b.beginElements(fam, table, set)
		}
		b.msg = appendElement(b.msg, e, add)
		k += size
	}
	if k > 0 {
		return b.endElements(list, typ, flags)
	}
	return nil
}

// beginElements starts an element message in b.msg; list is where its
// element list begins.
func (b *Batch) beginElements(fam byte, table, set string) (list int) {
	b.msg = append(b.msg[:0], fam, unix.NFNETLINK_V0, 0, 0)
	b.msg = AppendString(b.msg, unix.NFTA_SET_ELEM_LIST_TABLE, table)
	b.msg = AppendString(b.msg, unix.NFTA_SET_ELEM_LIST_SET, set)
	return BeginNested(&b.msg, unix.NFTA_SET_ELEM_LIST_ELEMENTS)
}

func (b *Batch) endElements(list int, typ, flags uint16) error {
	if len(b.msg)-list > 0xffff {
		// Never sent: the kernel would read a truncated list.
		return fmt.Errorf("nftables: an element message's list is %d bytes, above netlink's 65,535", len(b.msg)-list)
	}
	EndNested(b.msg, list)
	b.addNFT(typ, flags, b.msg)
	return nil
}

// appendElement appends one element (two for an interval) to an open
// element list: an addition with its data and userdata, a deletion by
// its key alone.
func appendElement(b []byte, e *Element, add bool) []byte {
	at := BeginNested(&b, unix.NFTA_LIST_ELEM)
	b = appendValue(b, unix.NFTA_SET_ELEM_KEY, e.Key)
	if add {
		switch {
		case e.Verdict != nil:
			data := BeginNested(&b, unix.NFTA_SET_ELEM_DATA)
			v := BeginNested(&b, unix.NFTA_DATA_VERDICT)
			b = AppendUint32(b, unix.NFTA_VERDICT_CODE, uint32(e.Verdict.Code))
			if e.Verdict.Chain != "" {
				b = AppendString(b, unix.NFTA_VERDICT_CHAIN, e.Verdict.Chain)
			}
			EndNested(b, v)
			EndNested(b, data)
		case len(e.Data) > 0:
			b = appendValue(b, unix.NFTA_SET_ELEM_DATA, e.Data)
		}
		if len(e.Userdata) > 0 {
			b = AppendAttr(b, unix.NFTA_SET_ELEM_USERDATA, e.Userdata)
		}
	}
	EndNested(b, at)
	if e.End != nil {
		at := BeginNested(&b, unix.NFTA_LIST_ELEM)
		b = AppendUint32(b, unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
		b = appendValue(b, unix.NFTA_SET_ELEM_KEY, e.End)
		EndNested(b, at)
	}
	return b
}

// appendValue appends a nested data attribute holding value v.
func appendValue(b []byte, typ uint16, v []byte) []byte {
	at := BeginNested(&b, typ)
	b = AppendAttr(b, unix.NFTA_DATA_VALUE, v)
	EndNested(b, at)
	return b
}

// ParseElements decodes an element message of a dump (a
// NFT_MSG_NEWSETELEM's attributes) and hands each kernel element to fn,
// in one scratch Element whose slices alias attrs: fn copies what it
// keeps.
func ParseElements(attrs []byte, fn func(*Element) error) error {
	var e Element
	var v Verdict
	var c Counter
	return eachElement(attrs, func(b []byte) error {
		if err := parseElement(b, &e, &v, &c); err != nil {
			return err
		}
		return fn(&e)
	})
}

func parseElement(b []byte, e *Element, v *Verdict, c *Counter) error {
	*e = Element{}
	var err error
	walk := Walk(b, func(typ uint16, a []byte) {
		switch typ {
		case unix.NFTA_SET_ELEM_KEY:
			e.Key = dataValue(a)
		case unix.NFTA_SET_ELEM_FLAGS:
			e.IntervalEnd = Uint32(a)&unix.NFT_SET_ELEM_INTERVAL_END != 0
		case unix.NFTA_SET_ELEM_USERDATA:
			e.Userdata = a
		case unix.NFTA_SET_ELEM_EXPR, SetElemExpressions:
			if e.Counter == nil {
				*c, e.Counter = Counter{}, c
			}
			err = parseCounter(typ, a, c)
		case unix.NFTA_SET_ELEM_DATA:
			err = parseData(a, e, v)
		}
	})
	if walk != nil {
		return walk
	}
	return err
}

// dataValue is the NFTA_DATA_VALUE of a nested data attribute, nil if
// it holds none.
func dataValue(nested []byte) []byte {
	var value []byte
	_ = Walk(nested, func(typ uint16, v []byte) {
		if typ == unix.NFTA_DATA_VALUE {
			value = v
		}
	})
	return value
}

// parseData reads an element's data: a value, or a verdict into v.
func parseData(nested []byte, e *Element, v *Verdict) error {
	e.Data = dataValue(nested)
	if e.Data != nil {
		return nil
	}
	if err := parseVerdict(nested, v); err != nil {
		return err
	}
	e.Verdict = v
	return nil
}

// parseVerdict reads the NFTA_DATA_VERDICT of a nested data attribute.
func parseVerdict(nested []byte, v *Verdict) error {
	*v = Verdict{}
	found := false
	err := Walk(nested, func(typ uint16, b []byte) {
		if typ != unix.NFTA_DATA_VERDICT {
			return
		}
		_ = Walk(b, func(typ uint16, b []byte) {
			switch typ {
			case unix.NFTA_VERDICT_CODE:
				if len(b) == 4 {
					v.Code, found = int32(binary.BigEndian.Uint32(b)), true
				}
			case unix.NFTA_VERDICT_CHAIN:
				v.Chain = String(b)
			}
		})
	})
	if err == nil && !found {
		err = fmt.Errorf("no verdict in element data")
	}
	return err
}

// parseCounter reads the counts of an element's counter expression: the
// kernel dumps one expression as NFTA_SET_ELEM_EXPR, several as a list in
// NFTA_SET_ELEM_EXPRESSIONS.
func parseCounter(typ uint16, b []byte, c *Counter) error {
	if typ == SetElemExpressions {
		var err error
		walk := Walk(b, func(t uint16, v []byte) {
			if t == unix.NFTA_LIST_ELEM && err == nil {
				err = parseCounter(unix.NFTA_SET_ELEM_EXPR, v, c)
			}
		})
		if err != nil {
			return err
		}
		return walk
	}
	var name string
	var data []byte
	if err := Walk(b, func(t uint16, v []byte) {
		switch t {
		case unix.NFTA_EXPR_NAME:
			name = String(v)
		case unix.NFTA_EXPR_DATA:
			data = v
		}
	}); err != nil || name != "counter" {
		return err
	}
	return Walk(data, func(t uint16, v []byte) {
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
