package nfnetlink

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// typeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an
// attribute's type.
const typeMask = 0x3fff

// Walk hands each netlink attribute of b, its type without flags and
// its payload, to fn. Nothing is copied: the payloads are slices of b.
// A length that does not fit ends the walk with an error.
func Walk(b []byte, fn func(typ uint16, v []byte)) error {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			return fmt.Errorf("netlink attribute of length %d in %d bytes", l, len(b))
		}
		fn(binary.NativeEndian.Uint16(b[2:])&typeMask, b[4:l])
		next := (l + 3) &^ 3
		if next >= len(b) {
			return nil
		}
		b = b[next:]
	}
	return nil
}

// TrimNUL strips a netlink string's terminating NULs.
func TrimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// String is a netlink string attribute's payload as a Go string.
func String(v []byte) string { return string(TrimNUL(v)) }

// Uint32 reads a big-endian 32-bit payload; 0 if v is not 4 bytes.
func Uint32(v []byte) uint32 {
	if len(v) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

// The writers below lay attributes out in place: a header (length,
// type) in host order, the payload, zeros up to 4 bytes.

func putHeader(b []byte, typ uint16, length int) {
	binary.NativeEndian.PutUint16(b, uint16(length))
	binary.NativeEndian.PutUint16(b[2:], typ)
}

// AppendAttr appends an attribute holding v.
func AppendAttr(b []byte, typ uint16, v []byte) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(b, v...)
	putHeader(b[at:], typ, 4+len(v))
	return pad(b)
}

// AppendString appends a NUL-terminated string attribute.
func AppendString(b []byte, typ uint16, s string) []byte {
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	b = append(append(b, s...), 0)
	putHeader(b[at:], typ, 4+len(s)+1)
	return pad(b)
}

// AppendUint32 appends a big-endian 32-bit attribute.
func AppendUint32(b []byte, typ uint16, v uint32) []byte {
	var p [4]byte
	binary.BigEndian.PutUint32(p[:], v)
	return AppendAttr(b, typ, p[:])
}

func pad(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// BeginNested opens a nested attribute at the end of *b and returns
// where it starts, for EndNested to write its length once its content is
// appended.
func BeginNested(b *[]byte, typ uint16) int {
	at := len(*b)
	*b = append(*b, 0, 0, 0, 0)
	binary.NativeEndian.PutUint16((*b)[at+2:], typ|unix.NLA_F_NESTED)
	return at
}

// EndNested writes the length of the nested attribute opened at at.
func EndNested(b []byte, at int) {
	binary.NativeEndian.PutUint16(b[at:], uint16(len(b)-at))
}
