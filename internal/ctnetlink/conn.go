package ctnetlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrDumpInterrupted reports a dump the table changed under
// (NLM_F_DUMP_INTR): some entries may have been missed or seen twice.
var ErrDumpInterrupted = errors.New("conntrack dump interrupted")

// Conn is a netfilter netlink socket in one network namespace. It is not
// safe for concurrent use.
type Conn struct {
	sock *nl.NetlinkSocket
	fd   int
	seq  uint32
	buf  []byte // dump datagrams, reused
}

// recvBuffer is the dump's read buffer. The kernel sizes each datagram
// of a dump by the largest buffer the socket was read with, up to 32 KiB.
const recvBuffer = 64 << 10

// Open opens a socket in the namespace ns (netns.None() for the
// caller's).
func Open(ns netns.NsHandle) (*Conn, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open netfilter netlink socket: %w", err)
	}
	c := &Conn{sock: s, fd: s.GetFd()}
	// Errors come back without the request echoed.
	_ = unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return c, nil
}

// Close closes the socket.
func (c *Conn) Close() { c.sock.Close() }

// SetReceiveBuffer forces the socket's receive buffer to n bytes.
func (c *Conn) SetReceiveBuffer(n int) error {
	return unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
}

// FD is the socket's descriptor (for subscribing to groups).
func (c *Conn) FD() int { return c.fd }

// header lays out a netlink header and nfgenmsg at the start of b.
func header(b []byte, op uint16, flags uint16, seq uint32, family uint8) []byte {
	b = append(b, make([]byte, unix.SizeofNlMsghdr)...)
	at := len(b) - unix.SizeofNlMsghdr
	binary.NativeEndian.PutUint16(b[at+4:], subsysCtnetlink<<8|op)
	binary.NativeEndian.PutUint16(b[at+6:], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(b[at+8:], seq)
	return append(b, family, unix.NFNETLINK_V0, 0, 0)
}

// finish writes the length of the message that starts at at.
func finish(b []byte, at int) {
	binary.NativeEndian.PutUint32(b[at:], uint32(len(b)-at))
}

func (c *Conn) send(b []byte) error {
	for {
		err := unix.Sendto(c.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Dump streams the family's table (AF_INET or AF_INET6), narrowed by f in
// the kernel, and calls fn with each entry's attributes (after nfgenmsg),
// valid only during the call. An error from fn ends the dump (the rest is
// read and dropped). ErrDumpInterrupted is returned after the whole dump
// was read.
func (c *Conn) Dump(family uint8, f Filter, fn func(attrs []byte) error) error {
	c.seq++
	req := header(make([]byte, 0, 256), MsgGet, unix.NLM_F_DUMP, c.seq, family)
	req = appendFilter(req, family, f)
	finish(req, 0)
	if err := c.send(req); err != nil {
		return fmt.Errorf("conntrack dump request: %w", err)
	}
	if len(c.buf) < recvBuffer {
		c.buf = make([]byte, recvBuffer)
	}
	var fnErr error
	intr := false
	for {
		n, err := c.recv(c.buf)
		if err != nil {
			return errors.Join(fnErr, err)
		}
		done, derr := c.walk(c.buf[:n], func(flags uint16, attrs []byte) {
			intr = intr || flags&unix.NLM_F_DUMP_INTR != 0
			if fnErr == nil {
				fnErr = fn(attrs)
			}
		})
		if done || derr != nil {
			switch {
			case derr != nil:
				return errors.Join(fnErr, derr)
			case fnErr != nil:
				return fnErr
			case intr:
				return ErrDumpInterrupted
			}
			return nil
		}
	}
}

func (c *Conn) recv(buf []byte) (int, error) {
	for {
		n, _, flags, _, err := unix.Recvmsg(c.fd, buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("conntrack netlink receive: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			return 0, fmt.Errorf("conntrack netlink receive: datagram over %d bytes", len(buf))
		}
		return n, nil
	}
}

// walk hands each entry message of a dump datagram to fn; done at
// NLMSG_DONE or an error answer (returned).
func (c *Conn) walk(b []byte, fn func(flags uint16, attrs []byte)) (bool, error) {
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b))
		typ := binary.NativeEndian.Uint16(b[4:])
		flags := binary.NativeEndian.Uint16(b[6:])
		seq := binary.NativeEndian.Uint32(b[8:])
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return true, fmt.Errorf("conntrack netlink message of length %d in %d bytes", l, len(b))
		}
		body := b[unix.SizeofNlMsghdr:l]
		b = b[min(len(b), (l+3)&^3):]
		if seq != c.seq {
			continue // an answer to an earlier request
		}
		switch typ {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			if errno := errnoOf(body); errno != 0 {
				return true, fmt.Errorf("conntrack dump: %w", errno)
			}
			return true, nil
		}
		if len(body) >= nfgenLen {
			fn(flags, body[nfgenLen:])
		}
	}
	return false, nil
}

func errnoOf(body []byte) syscall.Errno {
	if len(body) < 4 {
		return 0
	}
	return syscall.Errno(-int32(binary.NativeEndian.Uint32(body)))
}
