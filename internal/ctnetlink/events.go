package ctnetlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// GroupDestroy is the multicast group of destroyed entries
// (NFNLGRP_CONNTRACK_DESTROY).
const GroupDestroy = 3

// ErrEventsLost reports that the kernel dropped events: the socket's
// receive buffer overflowed.
var ErrEventsLost = errors.New("conntrack events lost (receive buffer overflow)")

// Subscribe joins a multicast group (GroupDestroy). Only entries created
// while a namespace has a listener carry the events extension (unless
// net.netfilter.nf_conntrack_events is 1): subscribe before they are
// made.
func (c *Conn) Subscribe(group int) error {
	return unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, group)
}

// ReadEvents waits up to timeout for the next datagram of events and
// calls fn with each event's message type (IPCTNL_MSG_CT_*) and
// attributes. No datagram within timeout is no error.
func (c *Conn) ReadEvents(timeout time.Duration, fn func(op uint16, attrs []byte)) error {
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	if len(c.buf) < recvBuffer {
		c.buf = make([]byte, recvBuffer)
	}
	n, _, _, _, err := unix.Recvmsg(c.fd, c.buf, nil, 0)
	switch {
	case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.EINTR):
		return nil
	case errors.Is(err, unix.ENOBUFS):
		return ErrEventsLost
	case err != nil:
		return fmt.Errorf("conntrack events: %w", err)
	}
	b := c.buf[:n]
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.SizeofNlMsghdr+nfgenLen || l > len(b) {
			break
		}
		typ := binary.NativeEndian.Uint16(b[4:])
		if typ>>8 == subsysCtnetlink {
			fn(typ&0xff, b[unix.SizeofNlMsghdr+nfgenLen:l])
		}
		b = b[min(len(b), (l+3)&^3):]
	}
	return nil
}
