package nftables

import (
	"context"
	"fmt"
	"sync"

	gnft "github.com/google/nftables"
	"github.com/mdlayher/netlink"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// NetlinkConn talks to nf_tables over netlink in the caller's network
// namespace. github.com/google/nftables builds the messages; the batch is
// laid out and sent by internal/nfnetlink (its package documentation
// says why). Every Run is one batch: the kernel commits it whole or not
// at all. Its own methods write (this file, with the batch's encoding in
// netlink_batch.go); the reads are its netlinkReader's (netlink_read.go).
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

	// netlinkReader answers the reads of Conn (netlink_read.go).
	netlinkReader
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
