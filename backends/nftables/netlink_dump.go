package nftables

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// eachAttr walks netlink attributes, handing each one's type (without
// the nested and byte-order flags, NLA_TYPE_MASK) and payload to fn.
// Nothing is copied:
// the payloads are slices of b.
func eachAttr(b []byte, fn func(typ uint16, v []byte)) error {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			return fmt.Errorf("netlink attribute of length %d in %d bytes", l, len(b))
		}
		fn(binary.NativeEndian.Uint16(b[2:])&0x3fff, b[4:l])
		next := (l + 3) &^ 3
		if next >= len(b) {
			return nil
		}
		b = b[next:]
	}
	return nil
}

// dumpAttr is a string attribute of a dump request.
type dumpAttr struct {
	typ uint16
	val string
}

// dumpEach sends one nf_tables dump request on an idle dump socket (or a
// new one) and hands each answer's attributes to fn as its datagram is
// read.
func (n *NetlinkConn) dumpEach(msgType uint16, fam ruleset.Family, attrs []dumpAttr, fn func([]byte) error) error {
	s, seq, err := n.takeDumpSocket()
	if err != nil {
		return err
	}
	err = s.dump(dumpRequest(msgType, fam, seq, attrs), fn)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		// Not an answer of the kernel: the socket may be out of step.
		s.close()
		return err
	}
	n.dmu.Lock()
	n.dumps = append(n.dumps, s)
	n.dmu.Unlock()
	return err
}

func (n *NetlinkConn) takeDumpSocket() (*nfSocket, uint32, error) {
	n.dmu.Lock()
	n.seq++
	seq := n.seq
	if k := len(n.dumps); k > 0 {
		s := n.dumps[k-1]
		n.dumps = n.dumps[:k-1]
		n.dmu.Unlock()
		return s, seq, nil
	}
	n.dmu.Unlock()
	s, err := openNFSocket(1 << 20)
	return s, seq, err
}

// dumpRequest lays out a dump request with string attributes.
func dumpRequest(msgType uint16, fam ruleset.Family, seq uint32, attrs []dumpAttr) []byte {
	proto := byte(unix.NFPROTO_IPV4)
	if fam == ruleset.IPv6 {
		proto = unix.NFPROTO_IPV6
	}
	req := make([]byte, nlmsgHeaderLen, 256)
	req = append(req, proto, unix.NFNETLINK_V0, 0, 0)
	for _, a := range attrs {
		v := append([]byte(a.val), 0)
		req = binary.NativeEndian.AppendUint16(req, uint16(4+len(v)))
		req = binary.NativeEndian.AppendUint16(req, a.typ)
		req = append(req, v...)
		for len(req)%4 != 0 {
			req = append(req, 0)
		}
	}
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], uint16(unix.NFNL_SUBSYS_NFTABLES<<8|int(msgType)))
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], seq)
	return req
}

// dump sends the request and reads its answers to the end: the socket
// is left with nothing queued, even when fn fails.
func (s *nfSocket) dump(req []byte, fn func([]byte) error) error {
	if err := unix.Sendto(s.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink: sending a dump request: %w", err)
	}
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
func dumpMessage(m syscall.NetlinkMessage, fn func([]byte) error) (done bool, err error) {
	switch m.Header.Type {
	case unix.NLMSG_DONE:
		return true, nil
	case unix.NLMSG_ERROR:
		if len(m.Data) >= 4 {
			if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				return true, unix.Errno(errno)
			}
		}
		return true, nil
	}
	if len(m.Data) < 4 {
		return false, errors.New("short nf_tables message")
	}
	return false, fn(m.Data[4:])
}

// dumpBuffer is the receive buffer of a dump. The kernel sizes each
// datagram of a dump by the largest buffer the socket has been read
// with (up to 32 KiB), and walks a set from its start for each one,
// skipping what it sent before: reading with a small buffer made a
// 100k-element set's dump cost 274 ms here.
const dumpBuffer = 64 << 10

// receiveBlocking waits for the next datagram and returns its messages,
// read into *buf: they are valid until the next call.
func (s *nfSocket) receiveBlocking(buf *[]byte) ([]syscall.NetlinkMessage, error) {
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
