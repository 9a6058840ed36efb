package runner

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func nested(typ uint16, attrs ...[]byte) []byte {
	var v []byte
	for _, a := range attrs {
		v = append(v, a...)
	}
	return nlAttr(typ|unix.NLA_F_NESTED, v)
}

func be32(v int32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(v))
	return b
}

// nlMsg builds a netlink message of type typ: header, nfgenmsg, attrs.
func nlMsg(typ, flags uint16, attrs ...[]byte) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+nfgenmsgLen)
	for _, a := range attrs {
		b = append(b, a...)
	}
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	return b
}

// TestNFTDumpMessages: a rule message is handed over with its chain and
// the chain of its jump verdict; NLMSG_DONE ends the dump; a message
// flagged NLM_F_DUMP_INTR fails it so the caller dumps again.
func TestNFTDumpMessages(t *testing.T) {
	jump := func(code int32, chain string) []byte {
		return nested(nftaRuleExprs,
			nested(nftaListElem, nlAttr(nftaExprName, []byte("counter\x00"))),
			nested(nftaListElem, nlAttr(nftaExprName, []byte("immediate\x00")), nested(nftaExprData,
				nlAttr(1, be32(0)), // NFTA_IMMEDIATE_DREG: the verdict register
				nested(nftaImmData, nested(nftaDataVerdict,
					nlAttr(nftaVerdictCode, be32(code)), nlAttr(nftaVerdictChain, []byte(chain+"\x00")))))))
	}
	rule := func(chain string, exprs []byte) []byte {
		return nlMsg(nfnlSubsysNFTables<<8|nftMsgNewRule, unix.NLM_F_MULTI,
			nlAttr(nftaRuleTable, []byte("nat\x00")), nlAttr(nftaRuleChain, []byte(chain+"\x00")), exprs)
	}
	var data []byte
	data = append(data, rule("OUTPUT", jump(nftJump, "KUBE-SERVICES"))...)
	data = append(data, rule("OUTPUT", jump(nftGoto, "KUBE-X"))...)
	data = append(data, rule("OUTPUT", jump(-1, ""))...) // NF_ACCEPT
	data = append(data, nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, be32(0))...)
	var chains, targets []string
	done, err := nftDumpMessages(data, func(typ uint16, attrs []byte) {
		if typ != nftMsgNewRule {
			t.Errorf("message type %d", typ)
		}
		forAttrs(attrs, func(a uint16, v []byte) {
			switch a {
			case nftaRuleChain:
				chains = append(chains, string(cString(v)))
			case nftaRuleExprs:
				targets = append(targets, jumpTarget(v))
			}
		})
	})
	if !done || err != nil {
		t.Fatalf("done %v, err %v", done, err)
	}
	if want := []string{"KUBE-SERVICES", "KUBE-X", ""}; len(chains) != 3 || !slices.Equal(targets, want) {
		t.Errorf("chains %v targets %q, want 3 OUTPUT rules jumping to %q", chains, targets, want)
	}
	intr := rule("OUTPUT", nil)
	binary.NativeEndian.PutUint16(intr[6:], unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR)
	if _, err := nftDumpMessages(intr, func(uint16, []byte) {}); !errors.Is(err, errDumpInterrupted) {
		t.Errorf("interrupted dump: err %v", err)
	}
	errMsg := nlMsg(unix.NLMSG_ERROR, 0, be32(0))
	binary.NativeEndian.PutUint32(errMsg[unix.NLMSG_HDRLEN:], uint32(0xffffffff-uint32(unix.ENOENT)+1))
	if _, err := nftDumpMessages(errMsg, func(uint16, []byte) {}); !errors.Is(err, unix.ENOENT) {
		t.Errorf("error message: err %v, want ENOENT", err)
	}
}
