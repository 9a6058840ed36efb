package nfnetlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// Socket is a netfilter netlink socket, opened in the network namespace
// of the calling thread, for committing batches and reading dumps.
type Socket struct{ fd int }

// Open opens a socket whose send and receive buffers hold bufferBytes
// (forced past the system limits: a full sync at 10k services is one
// batch of tens of MB, which one sendmsg must hold).
func Open(bufferBytes int) (*Socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	s := &Socket{fd: fd}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		s.Close()
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	for _, opt := range []int{unix.SO_SNDBUFFORCE, unix.SO_RCVBUFFORCE} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, bufferBytes); err != nil {
			s.Close()
			return nil, fmt.Errorf("setsockopt %d: %w", opt, err)
		}
	}
	return s, nil
}

// OpenPlain opens a socket with the system's buffer sizes.
func OpenPlain() (*Socket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	return &Socket{fd: fd}, nil
}

// Close closes the socket.
func (s *Socket) Close() { _ = unix.Close(s.fd) }

// Commit closes the batch with its end message and sends it in one
// sendmsg. The kernel processes it within that call, so whatever it
// answers (errors only: no message asks for an acknowledgement) is
// queued when sendmsg returns.
func (s *Socket) Commit(b *Batch) error {
	b.mark(unix.NFNL_MSG_BATCH_END)
	to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	if _, err := unix.SendmsgBuffers(s.fd, b.blocks, nil, to, 0); err != nil {
		return fmt.Errorf("netlink: sending a batch of %d messages (%d bytes): %w", b.msgs, b.Size(), err)
	}
	return s.answers()
}

// answers reads what the kernel queued for the batch and summarizes its
// errors: the first names the object it is about.
func (s *Socket) answers() error {
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
			errno := answerErrno(m)
			switch {
			case errno == 0:
			case first == nil:
				first = fmt.Errorf("%s: %w", DescribeEcho(m.Data[4:]), errno)
			default:
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

// answerErrno is the error an NLMSG_ERROR message reports, 0 for a
// success or another message.
func answerErrno(m syscall.NetlinkMessage) unix.Errno {
	if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
		return 0
	}
	return unix.Errno(-int32(binary.NativeEndian.Uint32(m.Data)))
}

// receive returns the next queued datagram's messages, or nil when none
// is queued. It peeks at the length first, so an empty queue (a committed
// batch) costs no buffer.
func (s *Socket) receive() ([]syscall.NetlinkMessage, error) {
	var probe [headerLen]byte
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
