package nfnetlink

import (
	"fmt"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ParseByteorder decodes a byteorder expression's NFTA_EXPR_DATA, which
// github.com/google/nftables does not.
func ParseByteorder(data []byte) (*expr.Byteorder, error) {
	e := &expr.Byteorder{}
	var bad error
	err := Walk(data, func(typ uint16, v []byte) {
		if len(v) < 4 {
			bad = fmt.Errorf("byteorder: bad attribute length %d", 4+len(v))
			return
		}
		n := Uint32(v[:4])
		switch typ {
		case unix.NFTA_BYTEORDER_SREG:
			e.SourceRegister = n
		case unix.NFTA_BYTEORDER_DREG:
			e.DestRegister = n
		case unix.NFTA_BYTEORDER_OP:
			e.Op = expr.ByteorderOp(n)
		case unix.NFTA_BYTEORDER_LEN:
			e.Len = n
		case unix.NFTA_BYTEORDER_SIZE:
			e.Size = n
		}
	})
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, fmt.Errorf("byteorder: %w", err)
	}
	return e, nil
}
