package nftables

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// NetlinkConn talks to nf_tables over netlink in the caller's network
// namespace. github.com/google/nftables builds the messages; the batch is
// laid out and sent by internal/nfnetlink (its package documentation
// says why). Every Run is one batch: the kernel commits it whole or not
// at all.
type NetlinkConn struct {
	// bufferBytes sizes the socket buffers: a full sync at 10k services
	// is one batch of tens of MB, which one sendmsg must hold.
	bufferBytes int

	mu sync.Mutex
	// sock is opened on first use, in the network namespace of the
	// thread that uses it first, and kept: opening and closing a
	// netfilter netlink socket per transaction cost ~10 ms each here.
	sock *nfnetlink.Socket
	// conn builds messages only: its "socket" is capture.
	conn *gnft.Conn
	// pending is the batch Append staged and its wire, which the next
	// Run commits.
	pending *batch
	wire    *nfnetlink.Batch

	qmu   sync.Mutex
	query *netlink.Conn // for ListObjects, Counts, Generation
	// dumps are idle sockets for streamed dumps, kept as query is: two
	// dumps may run at once, each on a socket of its own.
	dmu   sync.Mutex
	dumps []*nfnetlink.Socket
	seq   uint32
}

var _ Conn = (*NetlinkConn)(nil)

// NewNetlinkConn returns a connection to this network namespace.
func NewNetlinkConn() *NetlinkConn { return &NetlinkConn{bufferBytes: 256 << 20} }

// opsPerCapture bounds the messages google/nftables holds before they are
// moved into the wire.
const opsPerCapture = 256

// Run implements Conn.
func (n *NetlinkConn) Run(_ context.Context, tx *ruleset.Transaction) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.encode(tx); err != nil {
		return err
	}
	w := n.wire
	n.pending, n.wire = nil, nil
	defer w.Release()
	if w.Messages() == 0 {
		return nil
	}
	if n.sock == nil {
		s, err := nfnetlink.Open(n.bufferBytes)
		if err != nil {
			return err
		}
		n.sock = s
	}
	if err := n.sock.Commit(w); err != nil {
		// Start the next transaction on a fresh socket, with nothing of
		// this one's answers left queued.
		n.sock.Close()
		n.sock = nil
		return err
	}
	return nil
}

// Append implements Conn: the operations are encoded into the open batch
// (and a disposable transaction's payload dropped) until Run sends it.
func (n *NetlinkConn) Append(_ context.Context, tx *ruleset.Transaction) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.encode(tx)
}

// Discard implements Conn.
func (n *NetlinkConn) Discard() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.drop()
}

// encode adds tx's operations to the open batch, opening one if needed.
func (n *NetlinkConn) encode(tx *ruleset.Transaction) error {
	if n.conn == nil {
		c, err := gnft.New(gnft.AsLasting(), gnft.WithTestDial(n.capture))
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		n.conn = c
	}
	b := n.pending
	if b == nil {
		n.wire = nfnetlink.NewBatch()
		b = &batch{c: n.conn, fam: tx.Family, table: &gnft.Table{Name: tx.Table, Family: nftFamily(tx.Family)},
			sets: map[string]*gnft.Set{}, flush: n.conn.Flush, wire: n.wire}
		n.pending = b
	} else if b.fam != tx.Family || b.table.Name != tx.Table {
		n.drop()
		return fmt.Errorf("netlink: a transaction on %s %s after operations staged on %s %s", tx.Family, tx.Table, b.fam, b.table.Name)
	}
	for i := range tx.Ops {
		if err := b.add(&tx.Ops[i]); err != nil {
			n.drop()
			return fmt.Errorf("operation %d (%s): %w", i, tx.Ops[i].String(), err)
		}
		tx.Release(i) // a disposable rewrite is held once: encoded, not rendered
		if (i+1)%opsPerCapture == 0 {
			if err := n.move(); err != nil {
				return err
			}
		}
	}
	return n.move()
}

// move hands the messages google/nftables holds to the wire.
func (n *NetlinkConn) move() error {
	if err := n.conn.Flush(); err != nil {
		n.drop()
		return fmt.Errorf("netlink: encoding: %w", err)
	}
	return nil
}

// drop forgets whatever batch was being built.
func (n *NetlinkConn) drop() {
	if n.conn != nil {
		_ = n.conn.CloseLasting()
	}
	if n.wire != nil {
		n.wire.Release()
	}
	n.conn, n.pending, n.wire = nil, nil, nil
}

func nftFamily(f ruleset.Family) gnft.TableFamily {
	if f == ruleset.IPv6 {
		return gnft.TableFamilyIPv6
	}
	return gnft.TableFamilyIPv4
}

// capture stands in for the netlink socket of google/nftables' Conn
// (nfnetlink.Batch.Capture): what it flushes goes into the open wire.
func (n *NetlinkConn) capture(req []netlink.Message) ([]netlink.Message, error) {
	return n.wire.Capture(req)
}

// batch translates operations into netlink messages: google/nftables
// builds those of tables, chains, rules and sets; element messages are
// written straight into the wire (netlink_setelem.go), with the tags
// google/nftables has no field for.
type batch struct {
	c     *gnft.Conn
	fam   ruleset.Family
	table *gnft.Table
	sets  map[string]*gnft.Set
	// flush moves the messages google/nftables holds into the wire, so
	// that an element message written there comes after them.
	flush func() error
	wire  *nfnetlink.Batch
	// scratch and the slices below are reused by every element.
	scratch        nfnetlink.Element
	verdict        nfnetlink.Verdict
	key, end, data []byte
}

func (b *batch) add(o *ruleset.Op) error {
	switch o.Kind {
	case ruleset.OpAddTable:
		b.c.AddTable(b.table)
	case ruleset.OpDeleteTable:
		b.c.DelTable(b.table)
	case ruleset.OpAddChain:
		b.c.AddChain(b.chain(o.Chain))
	case ruleset.OpFlushChain:
		b.c.FlushChain(&gnft.Chain{Name: o.Name, Table: b.table})
	case ruleset.OpDeleteChain:
		b.c.DelChain(&gnft.Chain{Name: o.Name, Table: b.table})
	case ruleset.OpAddRule:
		return b.rule(o.Name, o.Rule)
	case ruleset.OpAddSet:
		s := b.set(o.Set)
		b.sets[s.Name] = s
		return b.c.AddSet(s, nil)
	case ruleset.OpFlushSet:
		b.c.FlushSet(&gnft.Set{Name: o.Name, Table: b.table})
	case ruleset.OpDeleteSet:
		b.c.DelSet(&gnft.Set{Name: o.Name, Table: b.table})
	case ruleset.OpAddElements, ruleset.OpDeleteElements:
		return b.elements(o)
	default:
		return fmt.Errorf("unknown operation %v", o.Kind)
	}
	return nil
}

var hookNums = map[string]*gnft.ChainHook{
	"prerouting": gnft.ChainHookPrerouting, "input": gnft.ChainHookInput, "forward": gnft.ChainHookForward,
	"output": gnft.ChainHookOutput, "postrouting": gnft.ChainHookPostrouting,
}

func (b *batch) chain(c *ruleset.Chain) *gnft.Chain {
	ch := &gnft.Chain{Name: c.Name, Table: b.table}
	if h := c.Hook; h != nil {
		policy := gnft.ChainPolicyAccept
		prio := gnft.ChainPriority(h.Priority)
		ch.Type, ch.Hooknum, ch.Priority, ch.Policy = gnft.ChainType(h.Type), hookNums[h.Hook], &prio, &policy
	}
	return ch
}

func (b *batch) rule(chain string, r ruleset.Rule) error {
	exprs, err := r.Compile(b.fam)
	if err != nil {
		return err
	}
	nr := &gnft.Rule{Table: b.table, Chain: &gnft.Chain{Name: chain, Table: b.table}, Exprs: exprs}
	if r.Comment != "" {
		nr.UserData = userdata.AppendString(nil, userdata.TypeComment, r.Comment)
	}
	b.c.AddRule(nr)
	return nil
}

// set describes a set to the kernel. It is named by the operations on
// it; the properties matter only where the set is created. As nft does,
// only an interval set with a concatenated key is flagged a concatenation:
// the kernel refuses nft's "add map" of an existing set whose flags
// differ, and kube-proxy adds the maps it shares with us that way.
func (b *batch) set(s *ruleset.Set) *gnft.Set {
	ns := &gnft.Set{
		Table: b.table, Name: s.Name, IsMap: s.Kind != ruleset.PlainSet,
		Interval: s.Interval, Dynamic: s.Dynamic, HasTimeout: s.Dynamic,
		Concatenation: s.Interval && len(s.Key) > 1, Size: s.Size, Comment: s.Comment, Counter: s.Counter,
		KeyType: setType(b.fam, s.Key),
	}
	if s.Interval {
		ns.KeyByteOrder = binaryutil.BigEndian
	}
	switch s.Kind {
	case ruleset.VerdictMap:
		ns.DataType = gnft.TypeVerdict
	case ruleset.DataMap:
		ns.DataType = setType(b.fam, s.Data)
	}
	return ns
}

func setType(f ruleset.Family, fs ruleset.Fields) gnft.SetDatatype {
	types := make([]gnft.SetDatatype, len(fs))
	for i, fl := range fs {
		switch fl {
		case ruleset.FieldSaddr, ruleset.FieldDaddr:
			types[i] = gnft.TypeIPAddr
			if f == ruleset.IPv6 {
				types[i] = gnft.TypeIP6Addr
			}
		case ruleset.FieldL4Proto:
			types[i] = gnft.TypeInetProto
		case ruleset.FieldDport:
			types[i] = gnft.TypeInetService
		default:
			// A fixed-size 32-bit type: nft gives "integer" no size
			// and cannot print a lookup whose key is such a value.
			types[i] = gnft.TypeMark
		}
	}
	if len(types) == 1 {
		return types[0]
	}
	return gnft.MustConcatSetType(types...)
}

// appendValues lays values out as the registers hold them: an address in
// network order; the protocol byte and the port (network order) each
// zero-padded to 4 bytes, as meta and payload loads leave them; slots and
// group identifiers big-endian.
func appendValues(out []byte, fs ruleset.Fields, vs []ruleset.Value) []byte {
	for i, v := range vs {
		switch fs[i] {
		case ruleset.FieldSaddr, ruleset.FieldDaddr:
			if v.Addr.Is4() {
				a := v.Addr.As4()
				out = append(out, a[:]...)
			} else {
				a := v.Addr.As16()
				out = append(out, a[:]...)
			}
		case ruleset.FieldL4Proto:
			out = append(out, uint8(v.Num), 0, 0, 0)
		case ruleset.FieldDport:
			out = append(out, uint8(v.Num>>8), uint8(v.Num), 0, 0)
		default:
			out = binary.BigEndian.AppendUint32(out, v.Num)
		}
	}
	return out
}
