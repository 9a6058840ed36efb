package ruleset

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"net/netip"
)

// PackKey packs an element's key (not its range end) into a short
// string: an address in 4 or 16 bytes, any other value in 4. A full sync
// over a live table keeps the table's elements by their packed keys, at
// ~12 bytes each instead of a Value slice.
func PackKey(vs []Value) string {
	b := make([]byte, 0, 4*len(vs)+12)
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
	}
	return string(b)
}

// UnpackKey is the inverse of PackKey for a key of fields fs in family f.
func UnpackKey(f Family, fs Fields, packed string) ([]Value, error) {
	out := make([]Value, len(fs))
	b := []byte(packed)
	for i, fl := range fs {
		n := 4
		if fl == FieldSaddr || fl == FieldDaddr {
			n = f.AddrLen()
		}
		if len(b) < n {
			return nil, fmt.Errorf("packed key of %d bytes too short for %s", len(packed), fs.Text(f))
		}
		if n == 4 && (fl == FieldSaddr || fl == FieldDaddr) {
			out[i].Addr = netip.AddrFrom4([4]byte(b[:4]))
		} else if n == 16 {
			out[i].Addr = netip.AddrFrom16([16]byte(b[:16]))
		} else {
			out[i].Num = binary.BigEndian.Uint32(b)
		}
		b = b[n:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("packed key of %d bytes too long for %s", len(packed), fs.Text(f))
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
