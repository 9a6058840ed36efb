package nfnetlink

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// echoNames gives, per nf_tables message type, what an error about it
// concerns and the attribute naming the object.
var echoNames = map[uint16]struct {
	what string
	attr uint16
}{
	unix.NFT_MSG_NEWTABLE:   {"add table", unix.NFTA_TABLE_NAME},
	unix.NFT_MSG_DELTABLE:   {"delete table", unix.NFTA_TABLE_NAME},
	unix.NFT_MSG_NEWCHAIN:   {"add chain", unix.NFTA_CHAIN_NAME},
	unix.NFT_MSG_DELCHAIN:   {"delete chain", unix.NFTA_CHAIN_NAME},
	unix.NFT_MSG_NEWRULE:    {"add rule to chain", unix.NFTA_RULE_CHAIN},
	unix.NFT_MSG_DELRULE:    {"flush chain", unix.NFTA_RULE_CHAIN},
	unix.NFT_MSG_NEWSET:     {"add set", unix.NFTA_SET_NAME},
	unix.NFT_MSG_DELSET:     {"delete set", unix.NFTA_SET_NAME},
	unix.NFT_MSG_NEWSETELEM: {"add elements to set", unix.NFTA_SET_ELEM_LIST_SET},
	unix.NFT_MSG_DELSETELEM: {"delete elements of set", unix.NFTA_SET_ELEM_LIST_SET},
}

// DescribeEcho names the message an error answers, from the copy of it
// the kernel sends back: `add rule to chain "x"`, or the commit itself
// when the error answers the batch.
func DescribeEcho(echo []byte) string {
	if len(echo) < headerLen {
		return "nf_tables"
	}
	typ := binary.NativeEndian.Uint16(echo[4:])
	if typ == unix.NFNL_MSG_BATCH_BEGIN || typ == unix.NFNL_MSG_BATCH_END {
		return "commit"
	}
	d, ok := echoNames[typ&0xff]
	if !ok || typ>>8 != unix.NFNL_SUBSYS_NFTABLES {
		return fmt.Sprintf("message type %#x", typ)
	}
	length := int(binary.NativeEndian.Uint32(echo))
	if length > len(echo) || length < headerLen+genmsgLen {
		return d.what // the kernel capped the copy to its header
	}
	name := ""
	if Walk(echo[headerLen+genmsgLen:length], func(t uint16, v []byte) {
		if t == d.attr && name == "" {
			name = String(v)
		}
	}) != nil || name == "" {
		return d.what
	}
	return fmt.Sprintf("%s %q", d.what, name)
}
