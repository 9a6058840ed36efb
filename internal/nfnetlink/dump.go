package nfnetlink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// StringAttr is a string attribute of a dump request: the table, chain
// or set the dump is about.
type StringAttr struct {
	Type  uint16
	Value string
}

// DumpRequest lays out nf_tables dump request typ (NFT_MSG_GET*) of
// family fam with string attributes.
func DumpRequest(typ uint16, fam byte, seq uint32, attrs ...StringAttr) []byte {
	req := make([]byte, headerLen, 256)
	req = append(req, fam, unix.NFNETLINK_V0, 0, 0)
	for _, a := range attrs {
		req = AppendString(req, a.Type, a.Value)
	}
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], msgType(typ))
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	return req
}

// Message is one answer of a dump: its nf_tables type (NFT_MSG_NEW*),
// its netlink flags and its attributes, valid only during the callback.
type Message struct {
	Type  uint16
	Flags uint16
	Attrs []byte
}

// Interrupted reports whether a concurrent commit interrupted the dump
// this message belongs to (NLM_F_DUMP_INTR): its answers may be
// inconsistent.
func (m Message) Interrupted() bool { return m.Flags&unix.NLM_F_DUMP_INTR != 0 }

// Dump sends the request and hands each answer to fn as its datagram is
// read, to the end: the socket is left with nothing queued, even when fn
// fails. The first error is returned; the kernel's refusal as a bare
// unix.Errno.
func (s *Socket) Dump(req []byte, fn func(Message) error) error {
	if err := unix.Sendto(s.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink: sending a dump request: %w", err)
	}
	return s.readDump(fn)
}

// readDump reads a dump's answers to its end.
func (s *Socket) readDump(fn func(Message) error) error {
	var buf []byte
	var first error
	for {
		msgs, err := s.receiveBlocking(&buf)
		if err != nil {
			return errors.Join(first, err)
		}
		for _, m := range msgs {
			done, err := dumpMessage(m, fn)
			if first == nil {
				first = err
			}
			if done {
				return first
			}
		}
	}
}

// dumpMessage handles one message of a dump; done at its end.
func dumpMessage(m syscall.NetlinkMessage, fn func(Message) error) (done bool, err error) {
	switch m.Header.Type {
	case unix.NLMSG_DONE:
		return true, nil
	case unix.NLMSG_ERROR:
		if errno := answerErrno(m); errno != 0 {
			return true, errno
		}
		return true, nil
	}
	if len(m.Data) < genmsgLen {
		return false, errors.New("short nf_tables message")
	}
	return false, fn(Message{Type: m.Header.Type & 0xff, Flags: m.Header.Flags, Attrs: m.Data[genmsgLen:]})
}

// dumpBuffer is the receive buffer of a dump. The kernel sizes each
// datagram of a dump by the largest buffer the socket has been read
// with (up to 32 KiB), and walks a set from its start for each one,
// skipping what it sent before: reading with a small buffer made a
// 100k-element set's dump cost 274 ms here.
const dumpBuffer = 64 << 10

// receiveBlocking waits for the next datagram and returns its messages,
// read into *buf: they are valid until the next call.
func (s *Socket) receiveBlocking(buf *[]byte) ([]syscall.NetlinkMessage, error) {
	if len(*buf) < dumpBuffer {
		*buf = make([]byte, dumpBuffer)
	}
	for {
		n, _, flags, _, err := unix.Recvmsg(s.fd, *buf, nil, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("netlink receive: %w", err)
		}
		if flags&unix.MSG_TRUNC != 0 {
			return nil, fmt.Errorf("netlink receive: a datagram longer than %d bytes", len(*buf))
		}
		return syscall.ParseNetlinkMessage((*buf)[:n])
	}
}
