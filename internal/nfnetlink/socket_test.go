package nfnetlink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair is a Socket whose "kernel" end the test writes to.
func socketPair(t *testing.T) (*Socket, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := &Socket{fd: fds[0]}
	t.Cleanup(func() { s.Close(); _ = unix.Close(fds[1]) })
	return s, fds[1]
}

// errorAnswer is an NLMSG_ERROR message reporting errno (0: success).
func errorAnswer(errno unix.Errno) []byte {
	b := newBatch(firstBlock)
	b.blocks = nil
	body := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	b.message(unix.NLMSG_ERROR, 0, append(body, make([]byte, headerLen)...))
	defer b.Release()
	return bytes.Join(b.blocks, nil)
}

// TestAnswersSummarizeErrors feeds a socket pair the kernel's kind of
// answer: the first error is named and wrapped, the others counted.
func TestAnswersSummarizeErrors(t *testing.T) {
	s, kernel := socketPair(t)
	if err := s.answers(); err != nil {
		t.Fatalf("nothing queued: %v", err)
	}
	for _, errno := range []unix.Errno{unix.ENOENT, unix.EBUSY} {
		if _, err := unix.Write(kernel, errorAnswer(errno)); err != nil {
			t.Fatal(err)
		}
	}
	err := s.answers()
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "and 1 more errors") {
		t.Errorf("got %v, want ENOENT first and one more", err)
	}
}

// TestReadDumpToTheEnd: a dump whose callback fails is still read to its
// end (the socket is left clean), the first error returned; an error
// answer ends a dump as a bare errno.
func TestReadDumpToTheEnd(t *testing.T) {
	s, kernel := socketPair(t)
	chain := nfMessage(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_MULTI, AppendString(nil, unix.NFTA_CHAIN_NAME, "x"))
	for _, d := range [][]byte{append(chain, chain...), chain, nfMessage(0, unix.NLM_F_MULTI, nil, unix.NLMSG_DONE)} {
		if _, err := unix.Write(kernel, d); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	fail := errors.New("fail")
	if err := s.readDump(func(Message) error { calls++; return fail }); !errors.Is(err, fail) || calls != 3 {
		t.Errorf("err %v after %d calls, want fail after 3", err, calls)
	}
	if _, err := unix.Write(kernel, errorAnswer(unix.ENOENT)); err != nil {
		t.Fatal(err)
	}
	if err := s.readDump(func(Message) error { return nil }); err != unix.ENOENT {
		t.Errorf("error answer: %v, want ENOENT", err)
	}
}

// nfMessage is a netlink message: nf_tables type typ (or netlink type
// raw[0]), flags, nfgenmsg, attrs.
func nfMessage(typ, flags uint16, attrs []byte, raw ...uint16) []byte {
	t := msgType(typ)
	if len(raw) > 0 {
		t = raw[0]
	}
	b := make([]byte, headerLen+genmsgLen, headerLen+genmsgLen+len(attrs))
	b = append(b, attrs...)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], t)
	binary.NativeEndian.PutUint16(b[6:], flags)
	return b
}
