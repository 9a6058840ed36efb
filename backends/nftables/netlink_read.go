package nftables

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mdlayher/netlink"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
	"golang.org/x/sys/unix"
)

// netlinkReader reads nf_tables over netlink: the table's objects, their
// counts, the ruleset generation (Conn's checks) and the elements of one
// set (a restart's read-back). Its sockets are opened on first use and
// kept, as NetlinkConn's is.
type netlinkReader struct {
	qmu   sync.Mutex
	query *netlink.Conn // for ListObjects, Counts, Generation
	// dumps are idle sockets for streamed dumps, kept as query is: two
	// dumps may run at once, each on a socket of its own.
	dmu   sync.Mutex
	dumps []*nfnetlink.Socket
	seq   uint32
}

// The queries below read only names, counts and flags from the kernel's
// answers, never rules or elements in full: a periodic check at 10k
// services stays a few dumps of small messages.

// get sends one nf_tables request (not a dump) and returns the answers.
// The socket is kept, as Run's is: closing one right after a commit
// waits for the kernel (~10 ms here).
func (q *netlinkReader) get(msgType uint16, fam byte, attrs ...nfnetlink.StringAttr) ([]netlink.Message, error) {
	q.qmu.Lock()
	defer q.qmu.Unlock()
	if q.query == nil {
		c, err := nfnetlink.Dial()
		if err != nil {
			return nil, err
		}
		q.query = c
	}
	msgs, err := nfnetlink.Get(q.query, msgType, fam, attrs...)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		// Not an answer of the kernel: the socket may be out of step.
		_ = q.query.Close()
		q.query = nil
	}
	return msgs, err
}

// ListObjects implements Conn: the table, then streamed dumps of its
// chains' and sets' names.
func (q *netlinkReader) ListObjects(_ context.Context, fam ruleset.Family, table string) (TableObjects, bool, error) {
	msgs, err := q.get(unix.NFT_MSG_GETTABLE, nfproto(fam), nfnetlink.StringAttr{Type: unix.NFTA_TABLE_NAME, Value: table})
	if errors.Is(err, unix.ENOENT) {
		return TableObjects{}, false, nil
	}
	if err != nil {
		return TableObjects{}, false, fmt.Errorf("get table: %w", err)
	}
	// switchyard never writes userdata (a comment) on its tables.
	objs := TableObjects{Foreign: nfnetlink.HasTableUserdata(msgs)}
	if objs.Chains, err = q.dumpNames(unix.NFT_MSG_GETCHAIN, fam, unix.NFTA_CHAIN_TABLE, table, unix.NFTA_CHAIN_NAME); err != nil {
		return objs, true, fmt.Errorf("list chains: %w", err)
	}
	if objs.Sets, err = q.dumpNames(unix.NFT_MSG_GETSET, fam, unix.NFTA_SET_TABLE, table, unix.NFTA_SET_NAME); err != nil {
		return objs, true, fmt.Errorf("list sets: %w", err)
	}
	return objs, true, nil
}

// dumpNames streams a dump of the table's objects of one kind and
// collects one string attribute (typ) of each (nfnetlink.Socket.Names).
func (q *netlinkReader) dumpNames(msgType uint16, fam ruleset.Family, tableAttr uint16, table string, typ uint16) ([]string, error) {
	var out []string
	err := q.withDumpSocket(func(s *nfnetlink.Socket, seq uint32) error {
		var err error
		out, err = s.Names(msgType, nfproto(fam), seq, tableAttr, table, typ)
		return err
	})
	return out, err
}

// Counts implements Conn: one dump of the table's rules, one per set.
func (q *netlinkReader) Counts(ctx context.Context, fam ruleset.Family, table string) (TableCounts, error) {
	objs, _, err := q.ListObjects(ctx, fam, table)
	if err != nil {
		return TableCounts{}, err
	}
	c := TableCounts{Rules: map[string]int{}, Elements: map[string]int{}}
	for _, ch := range objs.Chains {
		c.Rules[ch] = 0
	}
	chains, err := q.dumpNames(unix.NFT_MSG_GETRULE, fam, unix.NFTA_RULE_TABLE, table, unix.NFTA_RULE_CHAIN)
	if err != nil {
		return c, fmt.Errorf("list rules: %w", err)
	}
	for _, ch := range chains {
		c.Rules[ch]++
	}
	for _, s := range objs.Sets {
		if c.Elements[s], err = q.countElements(fam, table, s); err != nil {
			return c, fmt.Errorf("list elements of %s: %w", s, err)
		}
	}
	return c, nil
}

// countElements counts a set's elements, an interval once.
func (q *netlinkReader) countElements(fam ruleset.Family, table, set string) (int, error) {
	count := 0
	err := q.withDumpSocket(func(s *nfnetlink.Socket, seq uint32) error {
		var err error
		count, err = s.CountElements(nfproto(fam), seq, table, set)
		return err
	})
	return count, err
}

// Generation implements Conn.
func (q *netlinkReader) Generation(context.Context) (uint32, error) {
	msgs, err := q.get(unix.NFT_MSG_GETGEN, unix.NFPROTO_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("get generation: %w", err)
	}
	return nfnetlink.ParseGeneration(msgs)
}

// ReadElements implements Conn: one dump of the set, decoded a datagram
// at a time into one scratch element. An interval set's start and end
// elements (the kernel keeps them apart) are paired once the dump is
// read: each start with the lowest end above it, as intervals never
// overlap.
func (q *netlinkReader) ReadElements(_ context.Context, fam ruleset.Family, table string, s *ruleset.Set, fn func(*ruleset.Element)) error {
	er := &elementReader{fam: fam, set: s, fn: fn}
	err := q.dumpEach(unix.NFT_MSG_GETSETELEM, fam, []nfnetlink.StringAttr{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Value: table}, {Type: unix.NFTA_SET_ELEM_LIST_SET, Value: s.Name},
	}, er.message)
	if err == nil {
		err = er.pair()
	}
	if err != nil {
		return fmt.Errorf("reading back set %s of %s %s: %w", s.Name, fam, table, err)
	}
	return nil
}

// ReadTable reads a whole table back from the kernel, for `switchyard
// explain` (readtable.go).
func (q *netlinkReader) ReadTable(ctx context.Context, fam ruleset.Family, table string) (t *ruleset.Table, exists bool, err error) {
	return readTable(ctx, q, fam, table)
}

// withDumpSocket runs fn on an idle dump socket (or a new one) with a
// fresh sequence number; two dumps may run at once, each on a socket of
// its own. A socket is kept for the next dump unless fn failed with
// something other than the kernel's answer.
func (q *netlinkReader) withDumpSocket(fn func(s *nfnetlink.Socket, seq uint32) error) error {
	s, seq, err := q.takeDumpSocket()
	if err != nil {
		return err
	}
	err = fn(s, seq)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		// Not an answer of the kernel: the socket may be out of step.
		s.Close()
		return err
	}
	q.dmu.Lock()
	q.dumps = append(q.dumps, s)
	q.dmu.Unlock()
	return err
}

// dumpEach sends one nf_tables dump request and hands each answer's
// attributes to fn as its datagram is read.
func (q *netlinkReader) dumpEach(msgType uint16, fam ruleset.Family, attrs []nfnetlink.StringAttr, fn func([]byte) error) error {
	return q.withDumpSocket(func(s *nfnetlink.Socket, seq uint32) error {
		return s.Dump(nfnetlink.DumpRequest(msgType, nfproto(fam), seq, attrs...), func(m nfnetlink.Message) error {
			return fn(m.Attrs)
		})
	})
}

func (q *netlinkReader) takeDumpSocket() (*nfnetlink.Socket, uint32, error) {
	q.dmu.Lock()
	q.seq++
	seq := q.seq
	if k := len(q.dumps); k > 0 {
		s := q.dumps[k-1]
		q.dumps = q.dumps[:k-1]
		q.dmu.Unlock()
		return s, seq, nil
	}
	q.dmu.Unlock()
	s, err := nfnetlink.Open(1 << 20)
	return s, seq, err
}

func nfproto(f ruleset.Family) byte { return nfnetlink.Family(f == ruleset.IPv6) }
