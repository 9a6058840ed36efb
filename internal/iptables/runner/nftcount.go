package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"golang.org/x/sys/unix"
)

// Netlink constants of nf_tables (linux/netfilter/nf_tables.h) needed to
// dump a table's chains and rules.
const (
	nftMsgNewChain = 3
	nftMsgGetChain = 4
	nftMsgNewRule  = 6
	nftMsgGetRule  = 7

	nftaChainTable = 1
	nftaChainName  = 3
	nftaChainUse   = 6
	nftaRuleTable  = 1
	nftaRuleChain  = 2
	nftaRuleExprs  = 4

	nftaListElem     = 1
	nftaExprName     = 1
	nftaExprData     = 2
	nftaImmData      = 2
	nftaDataVerdict  = 2
	nftaVerdictCode  = 1
	nftaVerdictChain = 2
	nftJump          = -3
	nftGoto          = -4

	nlaTypeMask = 0x3fff // strips NLA_F_NESTED and NLA_F_NET_BYTEORDER
)

// errDumpInterrupted: the ruleset changed during the dump
// (NLM_F_DUMP_INTR); the caller dumps again.
var errDumpInterrupted = errors.New("nf_tables dump interrupted by a concurrent change")

// nftCountRules dumps the chains, then the rules, of one iptables-nft
// table (table `table` of family ip or ip6) and counts the rules per
// chain. Only the chain name of each rule is read, except in the
// built-in chains, whose jump verdicts are decoded too. A dump that a
// concurrent commit interrupts is retried.
func nftCountRules(fam Family, table string) (*TableCounts, error) {
	var err error
	for range 5 {
		var out *TableCounts
		if out, err = nftCountRulesOnce(fam, table); !errors.Is(err, errDumpInterrupted) {
			return out, err
		}
	}
	return nil, err
}

func nftCountRulesOnce(fam Family, table string) (*TableCounts, error) {
	var out *TableCounts
	err := withNFTSocket(func(fd int) error {
		uses, err := nftChainUses(fd, nfproto(fam))
		if err != nil {
			return err
		}
		out, err = nftCountChainRules(fd, nfproto(fam), table, slices.Sorted(maps.Keys(uses[table])))
		if out != nil {
			out.Uses = uses[table]
			if out.Uses == nil {
				out.Uses = map[string]int{}
			}
		}
		return err
	})
	return out, err
}

// nftCountChainRules counts the rules of the named chains of a table, one
// dump per chain: the kernel resumes a dump spanning several reads by
// skipping every rule already sent, so one dump of a whole 400k-rule
// table is quadratic (a minute at 10k services); per chain it is not
// (~25 us a chain). A chain that does not exist counts 0 rules (or is
// left out if the table is gone).
func nftCountChainRules(fd int, nfproto byte, table string, chains []string) (*TableCounts, error) {
	out := &TableCounts{Rules: make(map[string]int, len(chains)), Jumps: map[string][]string{}}
	for _, name := range chains {
		filter := append(nlAttr(nftaRuleTable, append([]byte(table), 0)), nlAttr(nftaRuleChain, append([]byte(name), 0))...)
		builtin, n := IsBuiltinChain(name), 0
		err := nftDump(fd, nftMsgGetRule, nfproto, filter, func(typ uint16, attrs []byte) {
			if typ != nftMsgNewRule {
				return
			}
			n++
			if !builtin {
				return
			}
			forAttrs(attrs, func(t uint16, v []byte) {
				if t == nftaRuleExprs {
					if target := jumpTarget(v); target != "" {
						out.Jumps[name] = append(out.Jumps[name], target)
					}
				}
			})
		})
		if errors.Is(err, unix.ENOENT) {
			continue // no such table
		}
		if err != nil {
			return nil, err
		}
		out.Rules[name] = n
	}
	return out, nil
}

// withNFTSocket runs fn with a fresh nfnetlink socket.
func withNFTSocket(fn func(fd int) error) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	return fn(fd)
}

func nfproto(fam Family) byte {
	if fam == IPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// nftChainUses dumps the chains of a family: table name, then chain
// name, to the chain's use count (the kernel's reference count: its
// rules plus the jumps to it).
func nftChainUses(fd int, nfproto byte) (map[string]map[string]int, error) {
	uses := map[string]map[string]int{}
	err := nftDump(fd, nftMsgGetChain, nfproto, nil, func(typ uint16, attrs []byte) {
		if typ != nftMsgNewChain {
			return
		}
		var tbl, name []byte
		use := -1
		forAttrs(attrs, func(t uint16, v []byte) {
			switch {
			case t == nftaChainTable:
				tbl = cString(v)
			case t == nftaChainName:
				name = cString(v)
			case t == nftaChainUse && len(v) >= 4:
				use = int(binary.BigEndian.Uint32(v))
			}
		})
		if name == nil {
			return
		}
		m := uses[string(tbl)]
		if m == nil {
			m = map[string]int{}
			uses[string(tbl)] = m
		}
		m[string(name)] = use
	})
	return uses, err
}

// nftDump sends one nf_tables dump request and calls fn with the type
// and attributes (after the nfgenmsg header) of every message of the
// reply.
func nftDump(fd int, msg uint16, nfproto byte, attrs []byte, fn func(typ uint16, attrs []byte)) error {
	req := make([]byte, unix.NLMSG_HDRLEN+nfgenmsgLen, unix.NLMSG_HDRLEN+nfgenmsgLen+len(attrs))
	req = append(req, attrs...)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], nfnlSubsysNFTables<<8|msg)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], uint32(msg)) // seq
	req[unix.NLMSG_HDRLEN] = nfproto
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("netlink receive: %w", err)
		}
		done, err := nftDumpMessages(buf[:n], fn)
		if done || err != nil {
			return err
		}
	}
}

// nftDumpMessages walks the netlink messages of one datagram; done is
// set at the end of the dump.
func nftDumpMessages(b []byte, fn func(typ uint16, attrs []byte)) (done bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		typ, flags := binary.NativeEndian.Uint16(b[4:]), binary.NativeEndian.Uint16(b[6:])
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return false, fmt.Errorf("malformed netlink message (length %d of %d)", l, len(b))
		}
		msg := b[:l]
		b = b[min(len(b), (l+3)&^3):]
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			return true, errDumpInterrupted
		}
		switch typ {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			if len(msg) < unix.NLMSG_HDRLEN+4 {
				return true, fmt.Errorf("short netlink error message")
			}
			if errno := int32(binary.NativeEndian.Uint32(msg[unix.NLMSG_HDRLEN:])); errno != 0 {
				return true, fmt.Errorf("nf_tables dump: %w", unix.Errno(-errno))
			}
			return true, nil
		}
		if typ>>8 == nfnlSubsysNFTables && len(msg) >= unix.NLMSG_HDRLEN+nfgenmsgLen {
			fn(typ&0xff, msg[unix.NLMSG_HDRLEN+nfgenmsgLen:])
		}
	}
	return false, nil
}

// jumpTarget returns the chain a rule's jump or goto verdict names
// (NFTA_RULE_EXPRESSIONS: an "immediate" expression holding a verdict
// with a chain), or "".
func jumpTarget(exprs []byte) string {
	var target string
	forAttrs(exprs, func(t uint16, elem []byte) {
		if t != nftaListElem || target != "" {
			return
		}
		var name, data []byte
		forAttrs(elem, func(t uint16, v []byte) {
			switch t {
			case nftaExprName:
				name = cString(v)
			case nftaExprData:
				data = v
			}
		})
		if string(name) == "immediate" {
			target = verdictChain(data)
		}
	})
	return target
}

// verdictChain decodes NFTA_IMMEDIATE_DATA > NFTA_DATA_VERDICT: the chain
// of a jump or goto verdict, or "".
func verdictChain(imm []byte) string {
	var code int32
	var chain string
	forAttrs(imm, func(t uint16, v []byte) {
		if t != nftaImmData {
			return
		}
		forAttrs(v, func(t uint16, v []byte) {
			if t != nftaDataVerdict {
				return
			}
			forAttrs(v, func(t uint16, v []byte) {
				switch {
				case t == nftaVerdictCode && len(v) >= 4:
					code = int32(binary.BigEndian.Uint32(v))
				case t == nftaVerdictChain:
					chain = string(cString(v))
				}
			})
		})
	})
	if code != nftJump && code != nftGoto {
		return ""
	}
	return chain
}

// forAttrs calls fn for each netlink attribute in b, with its type
// (flags stripped) and payload.
func forAttrs(b []byte, fn func(typ uint16, v []byte)) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b[0:]))
		if l < 4 || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&nlaTypeMask, b[4:l])
		b = b[min(len(b), (l+3)&^3):]
	}
}

// nlAttr encodes one netlink attribute, padded.
func nlAttr(typ uint16, v []byte) []byte {
	b := make([]byte, 4, 4+len(v)+3)
	binary.NativeEndian.PutUint16(b[0:], uint16(4+len(v)))
	binary.NativeEndian.PutUint16(b[2:], typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// cString strips a netlink string's terminating NUL.
func cString(v []byte) []byte {
	if i := bytes.IndexByte(v, 0); i >= 0 {
		return v[:i]
	}
	return v
}
