package runner

import (
	"encoding/binary"
	"fmt"
	"maps"
	"testing"
)

// blobBuilder lays out an IPv4 x_tables blob the way the kernel returns
// it (struct ipt_entry, then the target).
type blobBuilder struct{ b []byte }

// add appends an entry with the named target (xt_entry_target header,
// then data) and returns its offset.
func (bb *blobBuilder) add(target string, data []byte) int {
	off := len(bb.b)
	size := (xtTargetHdrLen + len(data) + 7) &^ 7
	e := make([]byte, 112+size) // struct ipt_entry is 112 bytes
	binary.NativeEndian.PutUint16(e[iptEntryOffsets:], 112)
	binary.NativeEndian.PutUint16(e[iptEntryOffsets+2:], uint16(112+size))
	binary.NativeEndian.PutUint16(e[112:], uint16(xtTargetHdrLen+len(data)))
	copy(e[114:114+xtExtensionMaxLen], target)
	copy(e[112+xtTargetHdrLen:], data)
	bb.b = append(bb.b, e...)
	return off
}

func verdict(v int32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, uint32(v))
	return b
}

func errorName(name string) []byte {
	b := make([]byte, 32)
	copy(b, name)
	return b
}

// TestWalkEntries: a nat-like blob with PREROUTING (a jump to a user
// chain, a rule without target, its policy), a user chain with a DNAT
// rule and a user RETURN rule before its closing RETURN, an empty user
// chain and the final ERROR entry.
func TestWalkEntries(t *testing.T) {
	const entrySize = 112 + 40 // standard target: 32 + 4, aligned
	var bb blobBuilder
	// PREROUTING: jump to SVC, fall-through rule, policy ACCEPT.
	svcFirstRule := 3*entrySize + (112 + 64) // after 3 entries and SVC's ERROR head
	bb.add("", verdict(int32(svcFirstRule)))
	bb.add("", verdict(int32(2*entrySize)))
	policy := bb.add("", verdict(-2))
	bb.add("ERROR", errorName("SVC"))
	bb.add("DNAT", make([]byte, 16))
	bb.add("", verdict(-5)) // a user "-j RETURN"
	bb.add("", verdict(-5)) // the chain's closing RETURN
	bb.add("ERROR", errorName("EMPTY"))
	bb.add("", verdict(-5))
	bb.add("ERROR", errorName("ERROR"))
	info := &iptGetinfo{ValidHooks: 1}
	info.Underflow[0] = uint32(policy)
	got, err := walkEntries(bb.b, info, iptEntryOffsets)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"PREROUTING": 2, "SVC": 2, "EMPTY": 0}
	if !maps.Equal(got.Rules, want) {
		t.Errorf("rules %v, want %v", got.Rules, want)
	}
	if fmt.Sprint(got.Jumps) != "map[PREROUTING:[SVC]]" {
		t.Errorf("jumps %v, want PREROUTING -> SVC", got.Jumps)
	}
	if _, err := walkEntries(bb.b[:len(bb.b)-(112+64)], info, iptEntryOffsets); err == nil {
		t.Error("a blob without its final ERROR entry was accepted")
	}
	if _, err := walkEntries(bb.b[:50], info, iptEntryOffsets); err == nil {
		t.Error("a truncated blob was accepted")
	}
}
