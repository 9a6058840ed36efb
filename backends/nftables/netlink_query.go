package nftables

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// The queries below read only names, counts and flags from the kernel's
// answers, never rules or elements in full: a periodic check at 10k
// services stays a few dumps of small messages.

// get sends one nf_tables request (not a dump) and returns the answers.
// The socket is kept, as Run's is: closing one right after a commit
// waits for the kernel (~10 ms here).
func (n *NetlinkConn) get(msgType uint16, fam byte, attrs ...nfnetlink.StringAttr) ([]netlink.Message, error) {
	n.qmu.Lock()
	defer n.qmu.Unlock()
	if n.query == nil {
		c, err := nfnetlink.Dial()
		if err != nil {
			return nil, err
		}
		n.query = c
	}
	msgs, err := nfnetlink.Get(n.query, msgType, fam, attrs...)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		// Not an answer of the kernel: the socket may be out of step.
		_ = n.query.Close()
		n.query = nil
	}
	return msgs, err
}

// ListObjects implements Conn: the table, then streamed dumps of its
// chains' and sets' names.
func (n *NetlinkConn) ListObjects(_ context.Context, fam ruleset.Family, table string) (TableObjects, bool, error) {
	msgs, err := n.get(unix.NFT_MSG_GETTABLE, nfproto(fam), nfnetlink.StringAttr{Type: unix.NFTA_TABLE_NAME, Value: table})
	if errors.Is(err, unix.ENOENT) {
		return TableObjects{}, false, nil
	}
	if err != nil {
		return TableObjects{}, false, fmt.Errorf("get table: %w", err)
	}
	// switchyard never writes userdata (a comment) on its tables.
	objs := TableObjects{Foreign: nfnetlink.HasTableUserdata(msgs)}
	if objs.Chains, err = n.dumpNames(unix.NFT_MSG_GETCHAIN, fam, unix.NFTA_CHAIN_TABLE, table, unix.NFTA_CHAIN_NAME); err != nil {
		return objs, true, fmt.Errorf("list chains: %w", err)
	}
	if objs.Sets, err = n.dumpNames(unix.NFT_MSG_GETSET, fam, unix.NFTA_SET_TABLE, table, unix.NFTA_SET_NAME); err != nil {
		return objs, true, fmt.Errorf("list sets: %w", err)
	}
	return objs, true, nil
}

// dumpNames streams a dump of the table's objects of one kind and
// collects one string attribute (typ) of each (nfnetlink.Socket.Names).
func (n *NetlinkConn) dumpNames(msgType uint16, fam ruleset.Family, tableAttr uint16, table string, typ uint16) ([]string, error) {
	var out []string
	err := n.withDumpSocket(func(s *nfnetlink.Socket, seq uint32) error {
		var err error
		out, err = s.Names(msgType, nfproto(fam), seq, tableAttr, table, typ)
		return err
	})
	return out, err
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

// countElements counts a set's elements, an interval once.
func (n *NetlinkConn) countElements(fam ruleset.Family, table, set string) (int, error) {
	count := 0
	err := n.withDumpSocket(func(s *nfnetlink.Socket, seq uint32) error {
		var err error
		count, err = s.CountElements(nfproto(fam), seq, table, set)
		return err
	})
	return count, err
}

// Generation implements Conn.
func (n *NetlinkConn) Generation(context.Context) (uint32, error) {
	msgs, err := n.get(unix.NFT_MSG_GETGEN, unix.NFPROTO_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("get generation: %w", err)
	}
	return nfnetlink.ParseGeneration(msgs)
}
