package nfnetlink

import (
	"errors"

	"golang.org/x/sys/unix"
)

// ErrInterrupted reports a dump that a concurrent commit interrupted
// (NLM_F_DUMP_INTR): its answers may be inconsistent; dump again.
var ErrInterrupted = errors.New("nf_tables dump interrupted by a concurrent change")

// ChainUses dumps the chains of a family: table name, then chain name,
// to the chain's use count (the kernel's reference count: its rules plus
// the jumps to it; -1 if the answer lacks it).
func (s *Socket) ChainUses(fam byte, seq uint32) (map[string]map[string]int, error) {
	u := chainUses{}
	err := s.Dump(DumpRequest(unix.NFT_MSG_GETCHAIN, fam, seq), u.message)
	return u, err
}

// chainUses collects a chain dump's use counts.
type chainUses map[string]map[string]int

func (u chainUses) message(m Message) error {
	if m.Interrupted() {
		return ErrInterrupted
	}
	if m.Type != unix.NFT_MSG_NEWCHAIN {
		return nil
	}
	var table, name []byte
	use := -1
	err := Walk(m.Attrs, func(t uint16, v []byte) {
		switch {
		case t == unix.NFTA_CHAIN_TABLE:
			table = TrimNUL(v)
		case t == unix.NFTA_CHAIN_NAME:
			name = TrimNUL(v)
		case t == unix.NFTA_CHAIN_USE && len(v) == 4:
			use = int(Uint32(v))
		}
	})
	if err != nil || name == nil {
		return err
	}
	if u[string(table)] == nil {
		u[string(table)] = map[string]int{}
	}
	u[string(table)][string(name)] = use
	return nil
}

// ChainRules dumps the rules of one chain and counts them; with jumps,
// it also lists the chains its rules jump or go to, in rule order. A
// missing table is unix.ENOENT; a missing chain counts 0 rules.
func (s *Socket) ChainRules(fam byte, seq uint32, table, chain string, jumps bool) (n int, targets []string, err error) {
	req := DumpRequest(unix.NFT_MSG_GETRULE, fam, seq,
		StringAttr{unix.NFTA_RULE_TABLE, table}, StringAttr{unix.NFTA_RULE_CHAIN, chain})
	c := &ruleCount{jumps: jumps}
	err = s.Dump(req, c.message)
	return c.n, c.targets, err
}

// ruleCount counts a rule dump's rules and collects their jumps.
type ruleCount struct {
	jumps   bool
	n       int
	targets []string
}

func (c *ruleCount) message(m Message) error {
	if m.Interrupted() {
		return ErrInterrupted
	}
	if m.Type != unix.NFT_MSG_NEWRULE {
		return nil
	}
	c.n++
	if !c.jumps {
		return nil
	}
	return Walk(m.Attrs, func(t uint16, v []byte) {
		if t == unix.NFTA_RULE_EXPRESSIONS {
			if target := JumpTarget(v); target != "" {
				c.targets = append(c.targets, target)
			}
		}
	})
}

// JumpTarget returns the chain a rule's jump or goto verdict names, from
// its NFTA_RULE_EXPRESSIONS (an "immediate" expression holding a verdict
// with a chain), or "".
func JumpTarget(exprs []byte) string {
	target := ""
	_ = EachExpr(exprs, func(name string, data []byte) {
		if name != "immediate" || target != "" {
			return
		}
		code, chain := immediateVerdict(data)
		if code == unix.NFT_JUMP || code == unix.NFT_GOTO {
			target = chain
		}
	})
	return target
}

// EachExpr hands each expression of a rule's NFTA_RULE_EXPRESSIONS, its
// name and its NFTA_EXPR_DATA, to fn.
func EachExpr(list []byte, fn func(name string, data []byte)) error {
	return Walk(list, func(t uint16, elem []byte) {
		if t != unix.NFTA_LIST_ELEM {
			return
		}
		var name string
		var data []byte
		_ = Walk(elem, func(t uint16, v []byte) {
			switch t {
			case unix.NFTA_EXPR_NAME:
				name = String(v)
			case unix.NFTA_EXPR_DATA:
				data = v
			}
		})
		fn(name, data)
	})
}

// immediateVerdict decodes NFTA_IMMEDIATE_DATA > NFTA_DATA_VERDICT: the
// verdict code and chain of an immediate expression; code 0 (drop) and
// no chain when it holds no verdict.
func immediateVerdict(imm []byte) (code int32, chain string) {
	_ = Walk(imm, func(t uint16, v []byte) {
		if t == unix.NFTA_IMMEDIATE_DATA {
			var verdict Verdict
			if parseVerdict(v, &verdict) == nil {
				code, chain = verdict.Code, verdict.Chain
			}
		}
	})
	return code, chain
}
