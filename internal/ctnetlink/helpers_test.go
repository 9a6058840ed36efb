package ctnetlink

import (
	"encoding/binary"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

func walkTop(b []byte, fn func(uint16, []byte)) error { return nfnetlink.Walk(b, fn) }

func hostUint32(v []byte) uint32 {
	if len(v) != 4 {
		return 0
	}
	return binary.NativeEndian.Uint32(v)
}
