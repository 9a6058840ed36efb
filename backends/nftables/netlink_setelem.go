package nftables

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// Kernel verdict codes (linux/netfilter.h, nf_tables.h).
var verdictCodes = map[string]int32{"accept": 1, "drop": 0, "jump": unix.NFT_JUMP, "goto": unix.NFT_GOTO, "return": unix.NFT_RETURN}

// elements writes an element operation into the wire as NEWSETELEM or
// DELSETELEM messages of up to maxElementsPerMessage kernel elements and
// about maxElementListBytes (an interval is a start element and an end
// element one past its last value, never split between two messages),
// after the messages google/nftables holds.
func (b *batch) elements(o *ruleset.Op) error {
	if err := b.flush(); err != nil {
		return err
	}
	typ, flags := uint16(unix.NFT_MSG_NEWSETELEM), uint16(unix.NLM_F_REQUEST|unix.NLM_F_CREATE)
	add := o.Kind == ruleset.OpAddElements
	if !add {
		typ, flags = unix.NFT_MSG_DELSETELEM, unix.NLM_F_REQUEST
	}
	n, list := 0, b.beginElements(o.Name)
	for i := range o.Elements {
		e := &o.Elements[i]
		k := 1
		if e.KeyEnd != nil {
			k = 2
		}
		if n > 0 && (n+k > maxElementsPerMessage || len(b.msg)-list > maxElementListBytes) {
			if err := b.endElements(list, typ, flags); err != nil {
				return err
			}
			n, list = 0, b.beginElements(o.Name)
		}
		b.element(o.Set, e, add)
		n += k
	}
	if n > 0 {
		return b.endElements(list, typ, flags)
	}
	return nil
}

// beginElements starts an element message of set name; list is where its
// element list begins.
func (b *batch) beginElements(name string) (list int) {
	b.msg = append(b.msg[:0], byte(nftFamily(b.fam)), unix.NFNETLINK_V0, 0, 0)
	b.msg = appendStrAttr(b.msg, unix.NFTA_SET_ELEM_LIST_TABLE, b.table.Name)
	b.msg = appendStrAttr(b.msg, unix.NFTA_SET_ELEM_LIST_SET, name)
	return beginNest(&b.msg, unix.NFTA_SET_ELEM_LIST_ELEMENTS)
}

func (b *batch) endElements(list int, typ, flags uint16) error {
	if len(b.msg)-list > 0xffff {
		// Never sent: the kernel would read a truncated list.
		return fmt.Errorf("nftables: an element message's list is %d bytes, above netlink's 65,535", len(b.msg)-list)
	}
	endNest(b.msg, list)
	b.wire.message(uint16(unix.NFNL_SUBSYS_NFTABLES<<8)|typ, flags, b.msg)
	b.wire.msgs++
	return nil
}

// element appends one element (two for an interval) to the open list:
// an addition with its data and tag, a deletion by its key alone.
func (b *batch) element(s *ruleset.Set, e *ruleset.Element, add bool) {
	at := beginNest(&b.msg, unix.NFTA_LIST_ELEM)
	b.value(unix.NFTA_SET_ELEM_KEY, s.Key, e.Key)
	if add {
		switch {
		case e.Verdict != nil:
			data := beginNest(&b.msg, unix.NFTA_SET_ELEM_DATA)
			v := beginNest(&b.msg, unix.NFTA_DATA_VERDICT)
			b.msg = appendU32Attr(b.msg, unix.NFTA_VERDICT_CODE, uint32(verdictCodes[e.Verdict.Kind]))
			if e.Verdict.Chain != "" {
				b.msg = appendStrAttr(b.msg, unix.NFTA_VERDICT_CHAIN, e.Verdict.Chain)
			}
			endNest(b.msg, v)
			endNest(b.msg, data)
		case len(e.Data) > 0:
			b.value(unix.NFTA_SET_ELEM_DATA, s.Data, e.Data)
		}
		if e.Tag != nil {
			b.msg = appendAttr(b.msg, unix.NFTA_SET_ELEM_USERDATA, tagUserdata(e.Tag))
		} else if e.Counter != nil && e.Counter.Comment != "" {
			b.msg = appendAttr(b.msg, unix.NFTA_SET_ELEM_USERDATA, commentUserdata(e.Counter.Comment))
		}
	}
	endNest(b.msg, at)
	if e.KeyEnd != nil {
		at := beginNest(&b.msg, unix.NFTA_LIST_ELEM)
		b.msg = appendU32Attr(b.msg, unix.NFTA_SET_ELEM_FLAGS, unix.NFT_SET_ELEM_INTERVAL_END)
		k := beginNest(&b.msg, unix.NFTA_SET_ELEM_KEY)
		b.msg = appendAttr(b.msg, unix.NFTA_DATA_VALUE, binary.BigEndian.AppendUint32(nil, e.KeyEnd[0].Num+1))
		endNest(b.msg, k)
		endNest(b.msg, at)
	}
}

// value appends a nested data attribute holding values vs of fields fs.
func (b *batch) value(typ uint16, fs ruleset.Fields, vs []ruleset.Value) {
	at := beginNest(&b.msg, typ)
	hdr := len(b.msg)
	b.msg = append(b.msg, 0, 0, 0, 0)
	b.msg = appendValues(b.msg, fs, vs)
	putAttrHeader(b.msg[hdr:], unix.NFTA_DATA_VALUE, len(b.msg)-hdr)
	b.msg = pad(b.msg)
	endNest(b.msg, at)
}

// The attribute writers below lay netlink attributes out in place: a
// header (length, type) in host order, the payload, zeros to 4 bytes.

func putAttrHeader(b []byte, typ uint16, length int) {
	binary.NativeEndian.PutUint16(b, uint16(length))
	binary.NativeEndian.PutUint16(b[2:], typ)
}

func appendAttr(b []byte, typ uint16, v []byte) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(b, v...)
	putAttrHeader(b[at:], typ, 4+len(v))
	return pad(b)
}

func appendStrAttr(b []byte, typ uint16, s string) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(append(b, s...), 0)
	putAttrHeader(b[at:], typ, 4+len(s)+1)
	return pad(b)
}

func appendU32Attr(b []byte, typ uint16, v uint32) []byte {
	return appendAttr(b, typ, binary.BigEndian.AppendUint32(nil, v))
}

func pad(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// beginNest opens a nested attribute; endNest writes its length.
func beginNest(b *[]byte, typ uint16) int {
	at := len(*b)
	*b = append(*b, 0, 0, 0, 0)
	binary.NativeEndian.PutUint16((*b)[at+2:], typ|unix.NLA_F_NESTED)
	return at
}

func endNest(b []byte, at int) {
	binary.NativeEndian.PutUint16(b[at:], uint16(len(b)-at))
}
