package nfnetlink

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

func TestParseChain(t *testing.T) {
	a := AppendString(nil, unix.NFTA_CHAIN_TABLE, "kp")
	a = AppendString(a, unix.NFTA_CHAIN_NAME, "nat-output")
	a = AppendString(a, unix.NFTA_CHAIN_TYPE, "nat")
	a = append(a, nested(unix.NFTA_CHAIN_HOOK, AppendUint32(nil, unix.NFTA_HOOK_HOOKNUM, 3), AppendAttr(nil, unix.NFTA_HOOK_PRIORITY, be32(-100)))...)
	c, err := ParseChain(a)
	want := Chain{Table: "kp", Name: "nat-output", Hook: &Hook{Type: "nat", Num: 3, Priority: -100}}
	if err != nil || !cmp.Equal(c, want) {
		t.Errorf("chain %+v %v", c, err)
	}
	c, _ = ParseChain(AppendString(nil, unix.NFTA_CHAIN_NAME, "regular"))
	if c.Hook != nil {
		t.Errorf("regular chain with a hook")
	}
}

func TestParseRuleAndExprs(t *testing.T) {
	a := AppendString(nil, unix.NFTA_RULE_TABLE, "kp")
	a = AppendString(a, unix.NFTA_RULE_CHAIN, "c")
	a = append(a, jumpExprs(unix.NFT_JUMP, "d")...)
	a = AppendAttr(a, unix.NFTA_RULE_USERDATA, userdata.AppendString(nil, userdata.TypeComment, "hi"))
	r, err := ParseRule(a)
	if err != nil || r.Table != "kp" || r.Chain != "c" || r.Comment != "hi" || JumpTarget(r.Exprs) != "d" {
		t.Fatalf("rule %+v %v", r, err)
	}
	var names []string
	_ = EachExpr(r.Exprs, func(name string, _ []byte) { names = append(names, name) })
	if !cmp.Equal(names, []string{"counter", "immediate"}) {
		t.Errorf("expressions %v", names)
	}
}

func TestParseSet(t *testing.T) {
	a := AppendString(nil, unix.NFTA_SET_TABLE, "kp")
	a = AppendString(a, unix.NFTA_SET_NAME, "s")
	a = AppendUint32(a, unix.NFTA_SET_FLAGS, unix.NFT_SET_MAP|unix.NFT_SET_INTERVAL)
	a = AppendUint32(a, unix.NFTA_SET_KEY_TYPE, 19)
	a = AppendUint32(a, unix.NFTA_SET_DATA_TYPE, 7<<6|13)
	a = AppendAttr(a, unix.NFTA_SET_USERDATA, userdata.AppendString(nil, userdata.NFTNL_UDATA_SET_COMMENT, "why"))
	a = append(a, nested(unix.NFTA_SET_DESC, AppendUint32(nil, unix.NFTA_SET_DESC_SIZE, 65535))...)
	s, err := ParseSet(a)
	want := Set{Table: "kp", Name: "s", Flags: unix.NFT_SET_MAP | unix.NFT_SET_INTERVAL, KeyType: 19, DataType: 7<<6 | 13, Size: 65535, Comment: "why"}
	if err != nil || s != want {
		t.Errorf("set %+v %v", s, err)
	}
}

func TestParseByteorder(t *testing.T) {
	a := AppendUint32(nil, unix.NFTA_BYTEORDER_SREG, 1)
	a = AppendUint32(a, unix.NFTA_BYTEORDER_DREG, 2)
	a = AppendUint32(a, unix.NFTA_BYTEORDER_OP, uint32(expr.ByteorderHton))
	a = AppendUint32(a, unix.NFTA_BYTEORDER_LEN, 4)
	a = AppendUint32(a, unix.NFTA_BYTEORDER_SIZE, 2)
	e, err := ParseByteorder(a)
	want := &expr.Byteorder{SourceRegister: 1, DestRegister: 2, Op: expr.ByteorderHton, Len: 4, Size: 2}
	if err != nil || *e != *want {
		t.Errorf("byteorder %+v %v", e, err)
	}
	if _, err := ParseByteorder(AppendAttr(nil, unix.NFTA_BYTEORDER_SREG, []byte{1})); err == nil {
		t.Error("short attribute accepted")
	}
}
