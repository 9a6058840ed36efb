package nfnetlink

import (
	"bytes"
	"encoding/binary"
	"syscall"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

func nftMsg(typ int, flags netlink.HeaderFlags, data []byte) netlink.Message {
	return netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ), Flags: flags}, Data: data}
}

// parseBatch parses a batch's bytes as the kernel reads them.
func parseBatch(t *testing.T, b *Batch) []syscall.NetlinkMessage {
	t.Helper()
	msgs, err := syscall.ParseNetlinkMessage(bytes.Join(b.blocks, nil))
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// TestBatchLaysOutMessages checks the bytes the kernel reads: begin,
// every message in order with its padding and without an acknowledgement
// or echo request, end; also when messages straddle blocks.
func TestBatchLaysOutMessages(t *testing.T) {
	for _, block := range []int{5, 64, firstBlock} {
		b := newBatch(block)
		var sent [][]byte
		for i := range 40 {
			data := bytes.Repeat([]byte{byte(i)}, 4+i) // lengths 4..43: every padding
			sent = append(sent, data)
			m := nftMsg(unix.NFT_MSG_NEWRULE, netlink.Request|netlink.Acknowledge|netlink.Echo|netlink.Create, data)
			b.Add(&m)
		}
		b.mark(unix.NFNL_MSG_BATCH_END)
		if block < 64 && len(b.blocks) < 2 {
			t.Fatalf("block %d: %d blocks, want messages across several", block, len(b.blocks))
		}
		msgs := parseBatch(t, b)
		if len(msgs) != len(sent)+2 || b.Messages() != len(sent) {
			t.Fatalf("block %d: %d messages parsed, %d counted, want %d", block, len(msgs), b.Messages(), len(sent)+2)
		}
		if msgs[0].Header.Type != unix.NFNL_MSG_BATCH_BEGIN || msgs[len(msgs)-1].Header.Type != unix.NFNL_MSG_BATCH_END {
			t.Errorf("block %d: batch marks %d .. %d", block, msgs[0].Header.Type, msgs[len(msgs)-1].Header.Type)
		}
		for i, m := range msgs[1 : len(msgs)-1] {
			if !bytes.Equal(m.Data, sent[i]) || m.Header.Flags&(unix.NLM_F_ACK|unix.NLM_F_ECHO) != 0 || m.Header.Flags&unix.NLM_F_CREATE == 0 {
				t.Errorf("block %d: message %d: flags %#x data %v, want %v without NLM_F_ACK or NLM_F_ECHO", block, i, m.Header.Flags, m.Data, sent[i])
			}
		}
		b.Release()
		if b.blocks != nil || b.Messages() != 0 {
			t.Errorf("block %d: %d blocks, %d messages after release", block, len(b.blocks), b.Messages())
		}
	}
}

// TestBatchBeginFixture: the begin message, byte for byte.
func TestBatchBeginFixture(t *testing.T) {
	b := NewBatch()
	defer b.Release()
	want := []byte{20, 0, 0, 0, 0x10, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10}
	if got := bytes.Join(b.blocks, nil); !bytes.Equal(got, want) {
		t.Errorf("begin %v, want %v", got, want)
	}
}

// TestCaptureKeepsMessagesOnly: what google/nftables flushes reaches the
// batch without its batch marks, and every acknowledgement it waits for
// is a success.
func TestCaptureKeepsMessagesOnly(t *testing.T) {
	b := NewBatch()
	defer b.Release()
	req := []netlink.Message{
		{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_BEGIN}},
		nftMsg(unix.NFT_MSG_NEWTABLE, netlink.Request|netlink.Acknowledge, []byte{2, 0, 0, 0}),
		{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_END}},
	}
	if replies, err := b.Capture(req); err != nil || replies != nil {
		t.Fatalf("send: %v %v", replies, err)
	}
	if b.Messages() != 1 {
		t.Errorf("%d messages in the batch, want 1", b.Messages())
	}
	ack, err := b.Capture(nil)
	if err != nil || len(ack) != 1 || ack[0].Header.Type != netlink.Error || binary.NativeEndian.Uint32(ack[0].Data) != 0 {
		t.Errorf("acknowledgement %v %v, want one success", ack, err)
	}
}
