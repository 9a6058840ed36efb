package nfnetlink

import (
	"encoding/binary"
	"errors"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func nested(typ uint16, attrs ...[]byte) []byte {
	var v []byte
	for _, a := range attrs {
		v = append(v, a...)
	}
	return AppendAttr(nil, typ|unix.NLA_F_NESTED, v)
}

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// jumpExprs is a rule's expressions: a counter, then an immediate
// verdict of code to chain.
func jumpExprs(code int32, chain string) []byte {
	return nested(unix.NFTA_RULE_EXPRESSIONS,
		nested(unix.NFTA_LIST_ELEM, AppendString(nil, unix.NFTA_EXPR_NAME, "counter")),
		nested(unix.NFTA_LIST_ELEM, AppendString(nil, unix.NFTA_EXPR_NAME, "immediate"), nested(unix.NFTA_EXPR_DATA,
			AppendAttr(nil, unix.NFTA_IMMEDIATE_DREG, be32(0)), // the verdict register
			nested(unix.NFTA_IMMEDIATE_DATA, nested(unix.NFTA_DATA_VERDICT,
				AppendAttr(nil, unix.NFTA_VERDICT_CODE, be32(code)), AppendString(nil, unix.NFTA_VERDICT_CHAIN, chain))))))
}

// feed hands a datagram's messages to fn as a dump would.
func feed(t *testing.T, data []byte, fn func(Message) error) (done bool, err error) {
	t.Helper()
	msgs, perr := syscall.ParseNetlinkMessage(data)
	if perr != nil {
		t.Fatal(perr)
	}
	for _, m := range msgs {
		d, e := dumpMessage(m, fn)
		if err == nil {
			err = e
		}
		if d {
			return true, err
		}
	}
	return false, err
}

// TestRuleDump: rules are counted, a jump's or goto's chain is listed,
// another verdict is not; NLMSG_DONE ends the dump; a message flagged
// NLM_F_DUMP_INTR fails it so the caller dumps again; an error answer is
// its errno.
func TestRuleDump(t *testing.T) {
	rule := func(chain string, exprs []byte) []byte {
		return nfMessage(unix.NFT_MSG_NEWRULE, unix.NLM_F_MULTI,
			append(AppendString(AppendString(nil, unix.NFTA_RULE_TABLE, "nat"), unix.NFTA_RULE_CHAIN, chain), exprs...))
	}
	var data []byte
	data = append(data, rule("OUTPUT", jumpExprs(unix.NFT_JUMP, "KUBE-SERVICES"))...)
	data = append(data, rule("OUTPUT", jumpExprs(unix.NFT_GOTO, "KUBE-X"))...)
	data = append(data, rule("OUTPUT", jumpExprs(-1, "KUBE-Y"))...) // NF_ACCEPT with a chain: not a jump
	data = append(data, nfMessage(0, unix.NLM_F_MULTI, be32(0), unix.NLMSG_DONE)...)
	c := &ruleCount{jumps: true}
	if done, err := feed(t, data, c.message); !done || err != nil {
		t.Fatalf("done %v, err %v", done, err)
	}
	if want := []string{"KUBE-SERVICES", "KUBE-X"}; c.n != 3 || !slices.Equal(c.targets, want) {
		t.Errorf("%d rules jumping to %q, want 3 jumping to %q", c.n, c.targets, want)
	}
	intr := rule("OUTPUT", nil)
	binary.NativeEndian.PutUint16(intr[6:], unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR)
	if _, err := feed(t, intr, (&ruleCount{}).message); !errors.Is(err, ErrInterrupted) {
		t.Errorf("interrupted dump: err %v", err)
	}
	if _, err := feed(t, errorAnswer(unix.ENOENT), (&ruleCount{}).message); !errors.Is(err, unix.ENOENT) {
		t.Errorf("error message: err %v, want ENOENT", err)
	}
}

// TestChainUsesDump: each chain's use count, by table.
func TestChainUsesDump(t *testing.T) {
	chain := func(table, name string, use int32) []byte {
		a := AppendString(nil, unix.NFTA_CHAIN_TABLE, table)
		a = AppendString(a, unix.NFTA_CHAIN_NAME, name)
		return nfMessage(unix.NFT_MSG_NEWCHAIN, unix.NLM_F_MULTI, AppendAttr(a, unix.NFTA_CHAIN_USE, be32(use)))
	}
	u := chainUses{}
	data := append(append(chain("nat", "KUBE-SERVICES", 3), chain("filter", "INPUT", 1)...), chain("nat", "OUTPUT", 2)...)
	if _, err := feed(t, data, u.message); err != nil {
		t.Fatal(err)
	}
	if len(u) != 2 || u["nat"]["KUBE-SERVICES"] != 3 || u["nat"]["OUTPUT"] != 2 || u["filter"]["INPUT"] != 1 {
		t.Errorf("uses %v", u)
	}
}

// TestDumpRequestFixture: a dump request, byte for byte.
func TestDumpRequestFixture(t *testing.T) {
	got := DumpRequest(unix.NFT_MSG_GETSET, unix.NFPROTO_IPV6, 7, StringAttr{unix.NFTA_SET_TABLE, "kp"})
	want := []byte{
		28, 0, 0, 0, 0x0a, 0x0a, 0x01, 0x03, 7, 0, 0, 0, 0, 0, 0, 0, // GETSET, REQUEST|DUMP, seq 7
		10, 0, 0, 0, // NFPROTO_IPV6, version 0
		7, 0, 1, 0, 'k', 'p', 0, 0, // NFTA_SET_TABLE "kp"
	}
	if !slices.Equal(got, want) {
		t.Errorf("request\n%v\nwant\n%v", got, want)
	}
}
