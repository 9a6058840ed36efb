package nfnetlink

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// hdr lays out a netlink attribute header (host order; the fixtures
// are written for little-endian machines).
func hdr(length, typ uint16) []byte {
	return []byte{byte(length), byte(length >> 8), byte(typ), byte(typ >> 8)}
}

// TestAttributesEncode checks the writers against bytes written by hand:
// a string padded to 4 bytes, a big-endian number, a nested attribute
// with its flag and length.
func TestAttributesEncode(t *testing.T) {
	var b []byte
	b = AppendString(b, 1, "nat")
	b = AppendUint32(b, 2, 0x01020304)
	at := BeginNested(&b, 3)
	b = AppendAttr(b, 1, []byte{9, 9, 9, 9, 9})
	EndNested(b, at)
	want := bytes.Join([][]byte{
		hdr(8, 1), []byte("nat\x00"),
		hdr(8, 2), {1, 2, 3, 4},
		hdr(16, 3|unix.NLA_F_NESTED), hdr(9, 1), {9, 9, 9, 9, 9, 0, 0, 0},
	}, nil)
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded\n%v\nwant\n%v", b, want)
	}
	type attr struct {
		typ uint16
		v   string
	}
	var got []attr
	if err := Walk(b, func(typ uint16, v []byte) { got = append(got, attr{typ, string(v)}) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != (attr{1, "nat\x00"}) || got[1].typ != 2 || Uint32([]byte(got[1].v)) != 0x01020304 || got[2].typ != 3 {
		t.Fatalf("walked %v", got)
	}
	var inner []byte
	_ = Walk([]byte(got[2].v), func(_ uint16, v []byte) { inner = v })
	if !bytes.Equal(inner, []byte{9, 9, 9, 9, 9}) {
		t.Errorf("nested payload %v", inner)
	}
}

// TestWalkRejectsBadLengths: a length below the header or past the end
// fails the walk; an unpadded last attribute does not.
func TestWalkRejectsBadLengths(t *testing.T) {
	for _, b := range [][]byte{hdr(3, 1), append(hdr(12, 1), 0, 0, 0, 0)} {
		if err := Walk(b, func(uint16, []byte) {}); err == nil {
			t.Errorf("%v walked", b)
		}
	}
	if err := Walk(append(hdr(5, 1), 7), func(uint16, []byte) {}); err != nil {
		t.Errorf("unpadded last attribute: %v", err)
	}
	if String([]byte("a\x00\x00")) != "a" || Uint32([]byte{1, 2}) != 0 {
		t.Error("String or Uint32")
	}
}
