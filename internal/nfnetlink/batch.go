package nfnetlink

import (
	"bytes"
	"encoding/binary"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

const (
	// firstBlock and maxBlock bound a batch's blocks: a partial sync fits
	// the first; a full sync grows them to maxBlock each, far below the
	// 1,024 iovecs one sendmsg takes.
	firstBlock = 64 << 10
	maxBlock   = 4 << 20
)

// Batch is one nf_tables batch as the kernel reads it, begin message
// first, its messages laid out back to back across blocks (a message may
// straddle two: sendmsg gathers them into one buffer in the kernel). The
// blocks are mapped outside the Go heap and unmapped by Release: a
// restart's batch (~110 MB at 88k service ports) then neither raises the
// collector's heap goal nor waits for it to be returned to the system.
type Batch struct {
	blocks [][]byte
	next   int // size of the next block
	msgs   int // messages between begin and end
	seq    uint32
	// msg is reused by every element message (Elements).
	msg []byte
}

// NewBatch opens a batch.
func NewBatch() *Batch { return newBatch(firstBlock) }

func newBatch(block int) *Batch {
	b := &Batch{next: block}
	b.mark(unix.NFNL_MSG_BATCH_BEGIN)
	return b
}

// mark writes a batch begin or end message for nf_tables.
func (b *Batch) mark(typ uint16) {
	b.message(typ, unix.NLM_F_REQUEST, []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES})
}

// unasked are the flags cleared from every message: an acknowledgement
// (the kernel reports errors regardless) and the echo google/nftables
// asks of every new rule to learn its handle, which we never use (the
// kernel builds a copy of each rule for it). A committed batch then
// answers nothing.
const unasked = netlink.Acknowledge | netlink.Echo

// Add writes one nf_tables message built elsewhere (by
// github.com/google/nftables), without its acknowledgement and echo
// requests.
func (b *Batch) Add(m *netlink.Message) {
	b.message(uint16(m.Header.Type), uint16(m.Header.Flags&^unasked), m.Data)
	b.msgs++
}

// addNFT writes nf_tables message typ (NFT_MSG_*) with payload data.
func (b *Batch) addNFT(typ, flags uint16, data []byte) {
	b.message(msgType(typ), flags, data)
	b.msgs++
}

func (b *Batch) message(typ, flags uint16, data []byte) {
	var h [headerLen]byte
	b.seq++
	binary.NativeEndian.PutUint32(h[0:], uint32(headerLen+len(data)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], b.seq)
	b.write(h[:])
	b.write(data)
	var zeros [3]byte
	b.write(zeros[:(4-len(data)%4)%4])
}

func (b *Batch) write(p []byte) {
	for len(p) > 0 {
		if len(b.blocks) == 0 || len(b.blocks[len(b.blocks)-1]) == cap(b.blocks[len(b.blocks)-1]) {
			b.blocks = append(b.blocks, newBlock(b.next))
			b.next = min(2*b.next, maxBlock)
		}
		blk := &b.blocks[len(b.blocks)-1]
		n := min(len(p), cap(*blk)-len(*blk))
		*blk = append(*blk, p[:n]...)
		p = p[n:]
	}
}

// newBlock maps an empty block of capacity size; should the mapping
// fail, the Go heap serves.
func newBlock(size int) []byte {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, 0, size)
	}
	return b[:0]
}

// Release unmaps the blocks; the batch is empty afterwards.
func (b *Batch) Release() {
	for _, blk := range b.blocks {
		_ = unix.Munmap(blk[:cap(blk)]) // EINVAL for a heap block: nothing to do
	}
	b.blocks, b.msgs = nil, 0
}

// Messages is the number of messages between begin and end.
func (b *Batch) Messages() int { return b.msgs }

// Size is the batch's length in bytes so far.
func (b *Batch) Size() int {
	n := 0
	for _, blk := range b.blocks {
		n += len(blk)
	}
	return n
}

// ackReply is what Capture answers for each message waited on: a
// success acknowledgement.
var ackReply = []netlink.Message{{Header: netlink.Header{Type: netlink.Error}, Data: make([]byte, 4)}}

// Capture stands in for the netlink socket of google/nftables' Conn
// (through its dial option WithTestDial): the messages of each Flush go
// into the batch, without their batch marks, and every acknowledgement
// waited for is a success; the kernel's answer comes when the batch is
// committed. See the package documentation for why.
func (b *Batch) Capture(req []netlink.Message) ([]netlink.Message, error) {
	if req == nil {
		return ackReply, nil
	}
	for i := range req {
		switch req[i].Header.Type {
		case unix.NFNL_MSG_BATCH_BEGIN, unix.NFNL_MSG_BATCH_END:
		default:
			b.Add(&req[i])
		}
	}
	return nil, nil
}

// Bytes copies out the batch so far, as the kernel would read it: for
// tests.
func (b *Batch) Bytes() []byte { return bytes.Join(b.blocks, nil) }
