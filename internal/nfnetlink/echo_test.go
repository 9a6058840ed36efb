package nfnetlink

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDescribeEcho names the object of the message an error answers.
func TestDescribeEcho(t *testing.T) {
	attrs := AppendString(nil, unix.NFTA_RULE_TABLE, "kube-proxy")
	attrs = AppendString(attrs, unix.NFTA_RULE_CHAIN, "service-ABC")
	echo := func(typ uint16, payload []byte, length int) []byte {
		h := make([]byte, headerLen)
		binary.NativeEndian.PutUint32(h, uint32(length))
		binary.NativeEndian.PutUint16(h[4:], typ)
		return append(h, payload...)
	}
	payload := append([]byte{unix.NFPROTO_IPV4, 0, 0, 0}, attrs...)
	full := headerLen + len(payload)
	rule := uint16(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWRULE)
	for _, c := range []struct {
		name, want string
		echo       []byte
	}{
		{"whole copy", `add rule to chain "service-ABC"`, echo(rule, payload, full)},
		{"capped to the header", "add rule to chain", echo(rule, nil, full)},
		{"the batch", "commit", echo(unix.NFNL_MSG_BATCH_BEGIN, nil, headerLen)},
		{"another subsystem", "message type 0x106", echo(1<<8|6, payload, full)},
		{"truncated", "nf_tables", []byte{1, 2}},
	} {
		if got := DescribeEcho(c.echo); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
