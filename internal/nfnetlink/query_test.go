package nfnetlink

import (
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestParseGeneration reads NFTA_GEN_ID out of an NFT_MSG_NEWGEN
// answer's payload: nfgenmsg, NFTA_GEN_ID (big endian 7),
// NFTA_GEN_PROC_PID.
func TestParseGeneration(t *testing.T) {
	data := []byte{
		0, 0, 0, 0,
		8, 0, 1, 0, 0, 0, 0, 7,
		8, 0, 2, 0, 1, 0, 0, 0,
	}
	got, err := ParseGeneration([]netlink.Message{{Data: data}})
	if err != nil || got != 7 {
		t.Errorf("ParseGeneration = %d, %v; want 7", got, err)
	}
	if _, err := ParseGeneration([]netlink.Message{{Data: data[:4]}}); err == nil {
		t.Error("answer without NFTA_GEN_ID accepted")
	}
}

// TestHasTableUserdata: a table answer with a comment, and without.
func TestHasTableUserdata(t *testing.T) {
	plain := append([]byte{2, 0, 0, 0}, AppendString(nil, unix.NFTA_TABLE_NAME, "kube-proxy")...)
	commented := AppendAttr(plain, TableUserdata, []byte{0, 2, 'x', 0})
	if HasTableUserdata([]netlink.Message{{Data: plain}}) || !HasTableUserdata([]netlink.Message{{Data: commented}}) {
		t.Error("userdata misread")
	}
}
