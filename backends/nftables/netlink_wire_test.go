package nftables

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func nftMsg(typ int, flags netlink.HeaderFlags, data []byte) netlink.Message {
	return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ), Flags: flags}, Data: data}
}

// TestWireLaysOutOneBatch checks the bytes the kernel reads: begin,
// every message in order with its padding and without an acknowledgement
// or echo request, end; also when messages straddle blocks.
func TestWireLaysOutOneBatch(t *testing.T) {
	for _, block := range []int{5, 64, firstBlock} {
		w := &wire{next: block}
		w.batchMark(unix.NFNL_MSG_BATCH_BEGIN)
		var sent [][]byte
		for i := range 40 {
			data := bytes.Repeat([]byte{byte(i)}, 4+i) // lengths 4..43: every padding
			sent = append(sent, data)
			m := nftMsg(unix.NFT_MSG_NEWRULE, netlink.Request|netlink.Acknowledge|netlink.Echo|netlink.Create, data)
			w.add(&m)
		}
		w.batchMark(unix.NFNL_MSG_BATCH_END)
		if block < 64 && len(w.blocks) < 2 {
			t.Fatalf("block %d: %d blocks, want messages across several", block, len(w.blocks))
		}
		msgs, err := syscall.ParseNetlinkMessage(bytes.Join(w.blocks, nil))
		if err != nil {
			t.Fatalf("block %d: %v", block, err)
		}
		if len(msgs) != len(sent)+2 || w.msgs != len(sent) {
			t.Fatalf("block %d: %d messages parsed, %d counted, want %d", block, len(msgs), w.msgs, len(sent)+2)
		}
		if msgs[0].Header.Type != unix.NFNL_MSG_BATCH_BEGIN || msgs[len(msgs)-1].Header.Type != unix.NFNL_MSG_BATCH_END {
			t.Errorf("block %d: batch marks %d .. %d", block, msgs[0].Header.Type, msgs[len(msgs)-1].Header.Type)
		}
		for i, m := range msgs[1 : len(msgs)-1] {
			if !bytes.Equal(m.Data, sent[i]) || m.Header.Flags&(unix.NLM_F_ACK|unix.NLM_F_ECHO) != 0 || m.Header.Flags&unix.NLM_F_CREATE == 0 {
				t.Errorf("block %d: message %d: flags %#x data %v, want %v without NLM_F_ACK or NLM_F_ECHO", block, i, m.Header.Flags, m.Data, sent[i])
			}
		}
		w.release()
		if w.blocks != nil || w.msgs != 0 {
			t.Errorf("block %d: %d blocks, %d messages after release", block, len(w.blocks), w.msgs)
		}
	}
}

// TestCaptureKeepsMessagesOnly: what google/nftables flushes reaches the
// wire without its batch marks, and every acknowledgement it waits for is
// a success.
func TestCaptureKeepsMessagesOnly(t *testing.T) {
	n := &NetlinkConn{wire: newWire()}
	defer n.wire.release()
	req := []netlink.Message{
		{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_BEGIN}},
		nftMsg(unix.NFT_MSG_NEWTABLE, netlink.Request|netlink.Acknowledge, []byte{2, 0, 0, 0}),
		{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_END}},
	}
	if replies, err := n.capture(req); err != nil || replies != nil {
		t.Fatalf("send: %v %v", replies, err)
	}
	if n.wire.msgs != 1 {
		t.Errorf("%d messages in the wire, want 1", n.wire.msgs)
	}
	ack, err := n.capture(nil)
	if err != nil || len(ack) != 1 || ack[0].Header.Type != netlink.Error || binary.NativeEndian.Uint32(ack[0].Data) != 0 {
		t.Errorf("acknowledgement %v %v, want one success", ack, err)
	}
}

// TestDescribeEcho names the object of the message an error answers.
func TestDescribeEcho(t *testing.T) {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_RULE_TABLE, Data: []byte("kube-proxy\x00")},
		{Type: unix.NFTA_RULE_CHAIN, Data: []byte("service-ABC\x00")},
	})
	if err != nil {
		t.Fatal(err)
	}
	echo := func(typ uint16, payload []byte, length int) []byte {
		h := make([]byte, nlmsgHeaderLen)
		binary.NativeEndian.PutUint32(h, uint32(length))
		binary.NativeEndian.PutUint16(h[4:], typ)
		return append(h, payload...)
	}
	payload := append([]byte{unix.NFPROTO_IPV4, 0, 0, 0}, attrs...)
	full := nlmsgHeaderLen + len(payload)
	rule := uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE)
	for _, c := range []struct {
		name, want string
		echo       []byte
	}{
		{"whole copy", `add rule to chain "service-ABC"`, echo(rule, payload, full)},
		{"capped to the header", "add rule to chain", echo(rule, nil, full)},
		{"the batch", "commit", echo(unix.NFNL_MSG_BATCH_BEGIN, nil, nlmsgHeaderLen)},
		{"another subsystem", "message type 0x106", echo(1<<8|6, payload, full)},
		{"truncated", "nf_tables", []byte{1, 2}},
	} {
		if got := describeEcho(c.echo); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestAnswersSummarizeErrors feeds a socket pair the kernel's kind of
// answer: the first error is named and wrapped, the others counted.
func TestAnswersSummarizeErrors(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	s := &nfSocket{fd: fds[0]}
	defer s.close()
	if err := s.answers(); err != nil {
		t.Fatalf("nothing queued: %v", err)
	}
	for _, errno := range []unix.Errno{unix.ENOENT, unix.EBUSY} {
		w := &wire{next: firstBlock}
		body := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
		w.message(unix.NLMSG_ERROR, 0, append(body, make([]byte, nlmsgHeaderLen)...))
		_, err := unix.Write(fds[1], bytes.Join(w.blocks, nil))
		w.release()
		if err != nil {
			t.Fatal(err)
		}
	}
	err = s.answers()
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "and 1 more errors") {
		t.Errorf("got %v, want ENOENT first and one more", err)
	}
}
