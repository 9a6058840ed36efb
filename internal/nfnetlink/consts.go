package nfnetlink

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Values of linux/netfilter/nf_tables.h that golang.org/x/sys/unix does
// not name. Everything else is taken from unix.
const (
	// TableUserdata is NFTA_TABLE_USERDATA: a table's comment.
	TableUserdata = 6
	// SetElemExpressions is NFTA_SET_ELEM_EXPRESSIONS (Linux 5.11): the
	// list form of an element's expressions.
	SetElemExpressions = 0xb
)

const (
	// headerLen is a netlink message header's length (NLMSG_HDRLEN).
	headerLen = unix.NLMSG_HDRLEN
	// genmsgLen is struct nfgenmsg's length: family, version, resource id.
	genmsgLen = 4
)

// Family is the nfgenmsg family of an IPv4 or IPv6 table.
func Family(ipv6 bool) byte {
	if ipv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// msgType is the netlink message type of nf_tables message m.
func msgType(m uint16) uint16 { return unix.NFNL_SUBSYS_NFTABLES<<8 | m }

// Verdict codes (linux/netfilter.h, nf_tables.h).
const (
	verdictDrop   = 0 // NF_DROP
	verdictAccept = 1 // NF_ACCEPT
)

// VerdictCode is the kernel's code of a verdict named as nft names it.
func VerdictCode(name string) int32 {
	switch name {
	case "accept":
		return verdictAccept
	case "jump":
		return unix.NFT_JUMP
	case "goto":
		return unix.NFT_GOTO
	case "return":
		return unix.NFT_RETURN
	}
	return verdictDrop
}

// VerdictName names a verdict code as nft does.
func VerdictName(code int32) string {
	switch code {
	case unix.NFT_JUMP:
		return "jump"
	case unix.NFT_GOTO:
		return "goto"
	case unix.NFT_RETURN:
		return "return"
	case verdictDrop:
		return "drop"
	case verdictAccept:
		return "accept"
	}
	return fmt.Sprintf("verdict %d", code)
}
