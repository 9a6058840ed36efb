package nftables

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// withDumpSocket runs fn on an idle dump socket (or a new one) with a
// fresh sequence number; two dumps may run at once, each on a socket of
// its own. A socket is kept for the next dump unless fn failed with
// something other than the kernel's answer.
func (n *NetlinkConn) withDumpSocket(fn func(s *nfnetlink.Socket, seq uint32) error) error {
	s, seq, err := n.takeDumpSocket()
	if err != nil {
		return err
	}
	err = fn(s, seq)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		// Not an answer of the kernel: the socket may be out of step.
		s.Close()
		return err
	}
	n.dmu.Lock()
	n.dumps = append(n.dumps, s)
	n.dmu.Unlock()
	return err
}

// dumpEach sends one nf_tables dump request and hands each answer's
// attributes to fn as its datagram is read.
func (n *NetlinkConn) dumpEach(msgType uint16, fam ruleset.Family, attrs []nfnetlink.StringAttr, fn func([]byte) error) error {
	return n.withDumpSocket(func(s *nfnetlink.Socket, seq uint32) error {
		return s.Dump(nfnetlink.DumpRequest(msgType, nfproto(fam), seq, attrs...), func(m nfnetlink.Message) error {
			return fn(m.Attrs)
		})
	})
}

func (n *NetlinkConn) takeDumpSocket() (*nfnetlink.Socket, uint32, error) {
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
	s, err := nfnetlink.Open(1 << 20)
	return s, seq, err
}

func nfproto(f ruleset.Family) byte { return nfnetlink.Family(f == ruleset.IPv6) }
