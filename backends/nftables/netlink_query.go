package nftables

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// The queries below read only names, counts and flags from the kernel's
// answers, never rules or elements in full: a periodic check at 10k
// services stays a few dumps of small messages.

// request sends one nf_tables request (a dump when dump is set) and
// returns the answers. The socket is kept, as Run's is: closing one right
// after a commit waits for the kernel (~10 ms here).
func (n *NetlinkConn) request(msgType uint16, fam ruleset.Family, dump bool, attrs ...netlink.Attribute) ([]netlink.Message, error) {
	n.qmu.Lock()
	defer n.qmu.Unlock()
	if n.query == nil {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		n.query = c
	}
	c := n.query
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nil, err
	}
	flags := netlink.Request
	if dump {
		flags |= netlink.Dump
	}
	proto := byte(unix.NFPROTO_IPV4)
	if fam == ruleset.IPv6 {
		proto = unix.NFPROTO_IPV6
	} else if fam == "" {
		proto = unix.NFPROTO_UNSPEC
	}
	msg := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | int(msgType)), Flags: flags},
		Data:   append([]byte{proto, unix.NFNETLINK_V0, 0, 0}, data...),
	}
	msgs, err := c.Execute(msg)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		// Not an answer of the kernel: the socket may be out of step.
		_ = c.Close()
		n.query = nil
	}
	return msgs, err
}

func strAttr(typ uint16, s string) netlink.Attribute {
	return netlink.Attribute{Type: typ, Data: append([]byte(s), 0)}
}

// attrs decodes the attributes of an nf_tables answer.
func attrs(m netlink.Message) (*netlink.AttributeDecoder, error) {
	if len(m.Data) < 4 {
		return nil, fmt.Errorf("short nf_tables message")
	}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:])
	if err == nil {
		ad.ByteOrder = binary.BigEndian
	}
	return ad, err
}

// ListObjects implements Conn: the table, then streamed dumps of its
// chains' and sets' names.
func (n *NetlinkConn) ListObjects(_ context.Context, fam ruleset.Family, table string) (TableObjects, bool, error) {
	msgs, err := n.request(unix.NFT_MSG_GETTABLE, fam, false, strAttr(unix.NFTA_TABLE_NAME, table))
	if errors.Is(err, unix.ENOENT) {
		return TableObjects{}, false, nil
	}
	if err != nil {
		return TableObjects{}, false, fmt.Errorf("get table: %w", err)
	}
	objs := TableObjects{Foreign: hasTableUserdata(msgs)}
	if objs.Chains, err = n.dumpNames(unix.NFT_MSG_GETCHAIN, fam, unix.NFTA_CHAIN_TABLE, table, unix.NFTA_CHAIN_NAME); err != nil {
		return objs, true, fmt.Errorf("list chains: %w", err)
	}
	if objs.Sets, err = n.dumpNames(unix.NFT_MSG_GETSET, fam, unix.NFTA_SET_TABLE, table, unix.NFTA_SET_NAME); err != nil {
		return objs, true, fmt.Errorf("list sets: %w", err)
	}
	return objs, true, nil
}

// dumpNames streams a dump of the table's objects of one kind and collects
// one string attribute (typ) of each. The kernel does not filter every
// dump by the table the request names: a chain dump returns the chains
// of every table of the family (iptables-nft's filter, nat and mangle,
// where the kubelet keeps KUBE-IPTABLES-HINT and KUBE-KUBELET-CANARY), so
// each answer's table (tableAttr) is checked.
func (n *NetlinkConn) dumpNames(msgType uint16, fam ruleset.Family, tableAttr uint16, table string, typ uint16) ([]string, error) {
	var out []string
	err := n.dumpEach(msgType, fam, []dumpAttr{{tableAttr, table}}, func(attrs []byte) error {
		var name, owner []byte
		err := eachAttr(attrs, func(t uint16, v []byte) {
			switch t {
			case typ:
				name = trimNUL(v)
			case tableAttr:
				owner = trimNUL(v)
			}
		})
		if err == nil && string(owner) == table && len(name) > 0 {
			out = append(out, string(name))
		}
		return err
	})
	return out, err
}

// nftaTableUserdata is NFTA_TABLE_USERDATA (linux/netfilter/nf_tables.h),
// which x/sys/unix does not name.
const nftaTableUserdata = 6

// hasTableUserdata reports whether a table answer carries userdata (a
// comment): switchyard never writes any on its tables.
func hasTableUserdata(msgs []netlink.Message) bool {
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			continue
		}
		for ad.Next() {
			if ad.Type() == nftaTableUserdata {
				return true
			}
		}
	}
	return false
}

// Counts implements Conn: one dump of the table's rules, one per set.
func (n *NetlinkConn) Counts(ctx context.Context, fam ruleset.Family, table string) (TableCounts, error) {
	objs, _, err := n.ListObjects(ctx, fam, table)
	if err != nil {
		return TableCounts{}, err
	}
	c := TableCounts{Rules: map[string]int{}, Elements: map[string]int{}}
	for _, ch := range objs.Chains {
		c.Rules[ch] = 0
	}
	chains, err := n.dumpNames(unix.NFT_MSG_GETRULE, fam, unix.NFTA_RULE_TABLE, table, unix.NFTA_RULE_CHAIN)
	if err != nil {
		return c, fmt.Errorf("list rules: %w", err)
	}
	for _, ch := range chains {
		c.Rules[ch]++
	}
	for _, s := range objs.Sets {
		if c.Elements[s], err = n.countElements(fam, table, s); err != nil {
			return c, fmt.Errorf("list elements of %s: %w", s, err)
		}
	}
	return c, nil
}

// countElements counts a set's elements, an interval (a start and an end
// element in the kernel) once.
func (n *NetlinkConn) countElements(fam ruleset.Family, table, set string) (int, error) {
	count := 0
	err := n.dumpEach(unix.NFT_MSG_GETSETELEM, fam, []dumpAttr{
		{unix.NFTA_SET_ELEM_LIST_TABLE, table}, {unix.NFTA_SET_ELEM_LIST_SET, set},
	}, func(attrs []byte) error {
		return eachAttr(attrs, func(typ uint16, v []byte) {
			if typ != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				return
			}
			_ = eachAttr(v, func(typ uint16, elem []byte) {
				if typ == unix.NFTA_LIST_ELEM && !isIntervalEnd(elem) {
					count++
				}
			})
		})
	})
	return count, err
}

func isIntervalEnd(elem []byte) bool {
	end := false
	_ = eachAttr(elem, func(typ uint16, v []byte) {
		if typ == unix.NFTA_SET_ELEM_FLAGS && len(v) == 4 {
			end = binary.BigEndian.Uint32(v)&unix.NFT_SET_ELEM_INTERVAL_END != 0
		}
	})
	return end
}

// Generation implements Conn.
func (n *NetlinkConn) Generation(context.Context) (uint32, error) {
	msgs, err := n.request(unix.NFT_MSG_GETGEN, "", false)
	if err != nil {
		return 0, fmt.Errorf("get generation: %w", err)
	}
	for _, m := range msgs {
		ad, err := attrs(m)
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, fmt.Errorf("get generation: no generation in the answer")
}
