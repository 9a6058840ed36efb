package nfnetlink

import (
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Chain is what a chain dump tells of a chain.
type Chain struct {
	Table, Name string
	// Hook is nil for a regular chain.
	Hook *Hook
}

// Hook is a base chain's type, hook number (NF_INET_*) and priority.
type Hook struct {
	Type     string
	Num      uint32
	Priority int32
}

// ParseChain decodes an NFT_MSG_NEWCHAIN answer's attributes.
func ParseChain(attrs []byte) (Chain, error) {
	var c Chain
	var h Hook
	hooked := false
	err := Walk(attrs, func(typ uint16, v []byte) {
		switch typ {
		case unix.NFTA_CHAIN_TABLE:
			c.Table = String(v)
		case unix.NFTA_CHAIN_NAME:
			c.Name = String(v)
		case unix.NFTA_CHAIN_TYPE:
			h.Type = String(v)
		case unix.NFTA_CHAIN_HOOK:
			hooked = true
			_ = Walk(v, func(typ uint16, v []byte) { hookAttr(&h, typ, v) })
		}
	})
	if hooked {
		c.Hook = &h
	}
	return c, err
}

func hookAttr(h *Hook, typ uint16, v []byte) {
	if len(v) != 4 {
		return
	}
	switch typ {
	case unix.NFTA_HOOK_HOOKNUM:
		h.Num = Uint32(v)
	case unix.NFTA_HOOK_PRIORITY:
		h.Priority = int32(Uint32(v))
	}
}

// Rule is what a rule dump tells of a rule.
type Rule struct {
	Table, Chain string
	// Exprs is its NFTA_RULE_EXPRESSIONS, for EachExpr.
	Exprs []byte
	// Comment is the comment of its userdata.
	Comment string
}

// ParseRule decodes an NFT_MSG_NEWRULE answer's attributes; Exprs
// aliases attrs.
func ParseRule(attrs []byte) (Rule, error) {
	var r Rule
	err := Walk(attrs, func(typ uint16, v []byte) {
		switch typ {
		case unix.NFTA_RULE_TABLE:
			r.Table = String(v)
		case unix.NFTA_RULE_CHAIN:
			r.Chain = String(v)
		case unix.NFTA_RULE_EXPRESSIONS:
			r.Exprs = v
		case unix.NFTA_RULE_USERDATA:
			r.Comment, _ = userdata.GetString(v, userdata.TypeComment)
		}
	})
	return r, err
}

// Set is what a set dump tells of a set.
type Set struct {
	Table, Name string
	// Flags are NFT_SET_*; KeyType and DataType nft's (concatenated)
	// datatypes.
	Flags, KeyType, DataType uint32
	Size                     uint32
	Comment                  string
}

// ParseSet decodes an NFT_MSG_NEWSET answer's attributes.
func ParseSet(attrs []byte) (Set, error) {
	var s Set
	err := Walk(attrs, func(typ uint16, v []byte) {
		switch typ {
		case unix.NFTA_SET_TABLE:
			s.Table = String(v)
		case unix.NFTA_SET_NAME:
			s.Name = String(v)
		case unix.NFTA_SET_FLAGS:
			s.Flags = Uint32(v)
		case unix.NFTA_SET_KEY_TYPE:
			s.KeyType = Uint32(v)
		case unix.NFTA_SET_DATA_TYPE:
			s.DataType = Uint32(v)
		case unix.NFTA_SET_USERDATA:
			s.Comment, _ = userdata.GetString(v, userdata.NFTNL_UDATA_SET_COMMENT)
		case unix.NFTA_SET_DESC:
			_ = Walk(v, func(typ uint16, v []byte) {
				if typ == unix.NFTA_SET_DESC_SIZE {
					s.Size = Uint32(v)
				}
			})
		}
	})
	return s, err
}
