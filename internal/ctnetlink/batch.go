package ctnetlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Batch sends requests that need no answer (IPCTNL_MSG_CT_NEW,
// IPCTNL_MSG_CT_DELETE) many to a sendmsg. No request asks for an
// acknowledgement; the kernel answers failures only, queued on the
// socket by the time sendmsg returns, and Batch counts them by errno.
type Batch struct {
	c      *Conn
	family uint8
	op     uint16
	flags  uint16
	buf    []byte
	msgs   int
	// Sent counts the requests sent; Failed the kernel's error answers
	// by errno.
	Sent   int
	Failed map[syscall.Errno]int
}

// batchBytes bounds one sendmsg (the socket's send buffer holds it).
const batchBytes = 48 << 10

// NewBatch returns a batch of requests op (MsgNew, MsgDelete) for the
// family. New entries are created only if absent (NLM_F_CREATE|EXCL).
func (c *Conn) NewBatch(family uint8, op uint16) *Batch {
	var flags uint16
	if op == MsgNew {
		flags = unix.NLM_F_CREATE | unix.NLM_F_EXCL
	}
	return &Batch{c: c, family: family, op: op, flags: flags,
		buf: make([]byte, 0, batchBytes+1024), Failed: map[syscall.Errno]int{}}
}

// Add queues one request whose attributes append lays out after the
// headers; the batch is sent when full.
func (b *Batch) Add(appendAttrs func([]byte) []byte) error {
	at := len(b.buf)
	b.c.seq++
	b.buf = header(b.buf, b.op, b.flags, b.c.seq, b.family)
	b.buf = appendAttrs(b.buf)
	finish(b.buf, at)
	b.msgs++
	if len(b.buf) >= batchBytes {
		return b.Flush()
	}
	return nil
}

// AddRaw queues one request carrying attrs as they are (a dumped entry's
// attributes, for a delete).
func (b *Batch) AddRaw(attrs []byte) error {
	return b.Add(func(buf []byte) []byte { return append(buf, attrs...) })
}

// Flush sends what is queued and counts the kernel's answers.
func (b *Batch) Flush() error {
	if b.msgs == 0 {
		return nil
	}
	err := b.c.send(b.buf)
	b.Sent += b.msgs
	b.buf, b.msgs = b.buf[:0], 0
	if err != nil {
		return fmt.Errorf("conntrack netlink batch: %w", err)
	}
	return b.drain()
}

// drain reads the error answers queued on the socket.
func (b *Batch) drain() error {
	if len(b.c.buf) < recvBuffer {
		b.c.buf = make([]byte, recvBuffer)
	}
	for {
		n, _, _, _, err := unix.Recvmsg(b.c.fd, b.c.buf, nil, unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOBUFS):
			// Answers were lost: their count is unknown.
			b.Failed[unix.ENOBUFS]++
			continue
		case err != nil:
			return fmt.Errorf("conntrack netlink receive: %w", err)
		}
		_, _ = b.c.walkAny(b.c.buf[:n], func(errno syscall.Errno) { b.Failed[errno]++ })
	}
}

// Errors is the number of failed requests, leaving out the errnos in
// ignore (ENOENT for deletes of entries already gone).
func (b *Batch) Errors(ignore ...syscall.Errno) (int, error) {
	var n int
	var first error
outer:
	for errno, k := range b.Failed {
		for _, e := range ignore {
			if errno == e {
				continue outer
			}
		}
		n += k
		if first == nil {
			first = errno
		}
	}
	return n, first
}

// walkAny hands the errno of every error answer in b to fn, whatever its
// sequence number.
func (c *Conn) walkAny(b []byte, fn func(syscall.Errno)) (int, error) {
	var n int
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return n, errors.New("short conntrack netlink answer")
		}
		if binary.NativeEndian.Uint16(b[4:]) == unix.NLMSG_ERROR {
			if errno := errnoOf(b[unix.SizeofNlMsghdr:l]); errno != 0 {
				fn(errno)
				n++
			}
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return n, nil
}
