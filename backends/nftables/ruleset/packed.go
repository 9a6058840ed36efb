package ruleset

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
)

// PackedKey is an element's key (not its range end) packed into a fixed
// array: an address in 4 or 16 bytes, any other value in 4, zeros after.
// A full sync over a live table keeps the table's elements by their
// packed keys: no allocation per key, nothing for the collector to scan.
// Every key of switchyard's sets fits (the longest, an IPv6 address
// pair, takes 32 bytes); for a key of given fields and family the
// trailing zeros are unambiguous.
type PackedKey [32]byte

// PackKey packs vs; ok is false when they do not fit.
func PackKey(vs []Value) (k PackedKey, ok bool) {
	b := k[:0]
	for _, v := range vs {
		switch {
		case v.Addr.Is4():
			a := v.Addr.As4()
			b = append(b, a[:]...)
		case v.Addr.IsValid():
			a := v.Addr.As16()
			b = append(b, a[:]...)
		default:
			b = binary.BigEndian.AppendUint32(b, v.Num)
		}
		if len(b) > len(k) {
			return PackedKey{}, false
		}
	}
	copy(k[:], b)
	return k, true
}

// UnpackKey is the inverse of PackKey for a key of fields fs in family f.
func UnpackKey(f Family, fs Fields, k PackedKey) ([]Value, error) {
	out := make([]Value, len(fs))
	b := k[:]
	for i, fl := range fs {
		n := 4
		if fl == FieldSaddr || fl == FieldDaddr {
			n = f.AddrLen()
		}
		if len(b) < n {
			return nil, fmt.Errorf("a packed key cannot hold %s", fs.Text(f))
		}
		switch {
		case n == 4 && (fl == FieldSaddr || fl == FieldDaddr):
			out[i].Addr = netip.AddrFrom4([4]byte(b[:4]))
		case n == 16:
			out[i].Addr = netip.AddrFrom16([16]byte(b[:16]))
		default:
			out[i].Num = binary.BigEndian.Uint32(b)
		}
		b = b[n:]
	}
	return out, nil
}

// DataPrint identifies what an element maps its key to (its data values
// or its verdict and the verdict chain's tag); zero for a plain set's
// element.
func (e *Element) DataPrint() uint64 {
	if len(e.Data) == 0 && e.Verdict == nil {
		return 0
	}
	h := fnv.New64a()
	var b [20]byte
	for _, v := range e.Data {
		a := v.Addr.As16()
		copy(b[:16], a[:])
		binary.BigEndian.PutUint32(b[16:], v.Num)
		_, _ = h.Write(b[:])
	}
	if v := e.Verdict; v != nil {
		_, _ = h.Write([]byte(v.Kind))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(v.Chain))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(e.Tag.Key()))
	}
	return h.Sum64() | 1
}
