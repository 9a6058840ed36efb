package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The batch a Run commits is written here as the kernel reads it, rather
// than handed to google/nftables' Flush: that one marshals every message
// again into a buffer grown by append (the encoded batch held three to
// four times at its peak, ~900 MB for a restart at 88k service ports),
// asks the kernel for an acknowledgement of every message and an echo of
// every rule, and reads them one recvmsg at a time. google/nftables still
// builds every message; its connection only hands them over (capture).

const (
	nlmsgHeaderLen = 16
	// firstBlock and maxBlock bound the wire's blocks: a partial sync
	// fits the first; a full sync grows them to maxBlock each, far below
	// the 1,024 iovecs one sendmsg takes.
	firstBlock = 64 << 10
	maxBlock   = 4 << 20
)

// wire is one nf_tables batch, begin message first, its messages laid
// out back to back across blocks (a message may straddle two: sendmsg
// gathers them into one buffer in the kernel). The blocks are mapped
// outside the Go heap and unmapped by release: a restart's batch (~110
// MB at 88k service ports) then neither raises the collector's heap goal
// nor waits for it to be returned to the system.
type wire struct {
	blocks [][]byte
	next   int // size of the next block
	msgs   int // messages between begin and end
	seq    uint32
}

func newWire() *wire {
	w := &wire{next: firstBlock}
	w.batchMark(unix.NFNL_MSG_BATCH_BEGIN)
	return w
}

// batchMark writes a batch begin or end message for nf_tables.
func (w *wire) batchMark(typ uint16) {
	w.message(typ, unix.NLM_F_REQUEST, []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES})
}

// unasked are the flags cleared from every message: an acknowledgement
// (the kernel reports errors regardless) and the echo google/nftables
// asks of every new rule to learn its handle, which we never use (the
// kernel builds a copy of each rule for it). A committed batch then
// answers nothing.
const unasked = netlink.Acknowledge | netlink.Echo

// add writes one nf_tables message.
func (w *wire) add(m *netlink.Message) {
	w.message(uint16(m.Header.Type), uint16(m.Header.Flags&^unasked), m.Data)
	w.msgs++
}

func (w *wire) message(typ, flags uint16, data []byte) {
	var h [nlmsgHeaderLen]byte
	w.seq++
	binary.NativeEndian.PutUint32(h[0:], uint32(nlmsgHeaderLen+len(data)))
	binary.NativeEndian.PutUint16(h[4:], typ)
	binary.NativeEndian.PutUint16(h[6:], flags)
	binary.NativeEndian.PutUint32(h[8:], w.seq)
	w.write(h[:])
	w.write(data)
	var pad [3]byte
	w.write(pad[:(4-len(data)%4)%4])
}

func (w *wire) write(p []byte) {
	for len(p) > 0 {
		if len(w.blocks) == 0 || len(w.blocks[len(w.blocks)-1]) == cap(w.blocks[len(w.blocks)-1]) {
			w.blocks = append(w.blocks, newBlock(w.next))
			w.next = min(2*w.next, maxBlock)
		}
		b := &w.blocks[len(w.blocks)-1]
		n := min(len(p), cap(*b)-len(*b))
		*b = append(*b, p[:n]...)
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

// release unmaps the blocks; the wire is empty afterwards.
func (w *wire) release() {
	for _, b := range w.blocks {
		_ = unix.Munmap(b[:cap(b)]) // EINVAL for a heap block: nothing to do
	}
	w.blocks, w.msgs = nil, 0
}

// size is the batch's length in bytes so far.
func (w *wire) size() int {
	n := 0
	for _, b := range w.blocks {
		n += len(b)
	}
	return n
}

// ackReply is what capture answers google/nftables for each message it
// waits on: a success acknowledgement.
var ackReply = []netlink.Message{{Header: netlink.Header{Type: netlink.Error}, Data: make([]byte, 4)}}

// capture stands in for the netlink socket of google/nftables' Conn
// (through its dial option): the messages of each Flush go into the open
// wire, without their batch marks, and every acknowledgement it waits
// for is a success; the kernel's answer comes when the wire is sent.
func (n *NetlinkConn) capture(req []netlink.Message) ([]netlink.Message, error) {
	if req == nil {
		return ackReply, nil
	}
	for i := range req {
		switch req[i].Header.Type {
		case unix.NFNL_MSG_BATCH_BEGIN, unix.NFNL_MSG_BATCH_END:
		default:
			n.wire.add(&req[i])
		}
	}
	return nil, nil
}

// nfSocket is the netfilter netlink socket the batches go through.
type nfSocket struct{ fd int }

func openNFSocket(bufferBytes int) (*nfSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	s := &nfSocket{fd: fd}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		s.close()
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, bufferBytes); err != nil {
			s.close()
			return nil, fmt.Errorf("setsockopt %d: %w", opt, err)
		}
	}
	return s, nil
}

func (s *nfSocket) close() { _ = unix.Close(s.fd) }

// commit sends the batch, closed by its end message, in one sendmsg. The
// kernel processes it within that call, so whatever it answers (errors
// only: no message asks for an acknowledgement) is queued when sendmsg
// returns.
func (s *nfSocket) commit(w *wire) error {
	w.batchMark(unix.NFNL_MSG_BATCH_END)
	to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	if _, err := unix.SendmsgBuffers(s.fd, w.blocks, nil, to, 0); err != nil {
		return fmt.Errorf("netlink: sending a batch of %d messages (%d bytes): %w", w.msgs, w.size(), err)
	}
	return s.answers()
}

// answers reads what the kernel queued for the batch and summarizes its
// errors: the first names the object it is about.
func (s *nfSocket) answers() error {
	var first error
	more := 0
	for {
		msgs, err := s.receive()
		if err != nil {
			return errors.Join(first, err)
		}
		if msgs == nil {
			break
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			errno := -int32(binary.NativeEndian.Uint32(m.Data))
			if errno == 0 {
				continue
			}
			if first == nil {
				first = fmt.Errorf("%s: %w", describeEcho(m.Data[4:]), unix.Errno(errno))
			} else {
				more++
			}
		}
	}
	switch {
	case first == nil:
		return nil
	case more > 0:
		return fmt.Errorf("nf_tables rejected the transaction: %w (and %d more errors)", first, more)
	}
	return fmt.Errorf("nf_tables rejected the transaction: %w", first)
}

// receive returns the next queued datagram's messages, or nil when none
// is queued. It peeks at the length first, so an empty queue (a committed
// batch) costs no buffer.
func (s *nfSocket) receive() ([]syscall.NetlinkMessage, error) {
	var probe [nlmsgHeaderLen]byte
	n, _, _, _, err := unix.Recvmsg(s.fd, probe[:], nil, unix.MSG_DONTWAIT|unix.MSG_PEEK|unix.MSG_TRUNC)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return nil, nil
	case errors.Is(err, unix.ENOBUFS):
		return nil, errors.New("netlink: the kernel's answers overflowed the socket buffer")
	case err != nil:
		return nil, fmt.Errorf("netlink receive: %w", err)
	}
	buf := make([]byte, n)
	if n, _, _, _, err = unix.Recvmsg(s.fd, buf, nil, unix.MSG_DONTWAIT); err != nil {
		return nil, fmt.Errorf("netlink receive: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return nil, fmt.Errorf("netlink: parsing the kernel's answer: %w", err)
	}
	return msgs, nil
}

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

// describeEcho names the message an error answers, from the copy of it
// the kernel sends back: `add rule to chain "x"`, or the commit itself
// when the error answers the batch.
func describeEcho(echo []byte) string {
	if len(echo) < nlmsgHeaderLen {
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
	if length > len(echo) || length < nlmsgHeaderLen+4 {
		return d.what // the kernel capped the copy to its header
	}
	attrs, err := netlink.UnmarshalAttributes(echo[nlmsgHeaderLen+4 : length])
	if err != nil {
		return d.what
	}
	for _, a := range attrs {
		if a.Type&0x3fff == d.attr {
			return fmt.Sprintf("%s %q", d.what, string(trimNUL(a.Data)))
		}
	}
	return d.what
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}
