package nftables

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// ReadTable reads a whole table back from the kernel, for `switchyard
// explain`: chains with their hooks and rules, sets and maps with their
// elements. It only reads. A rule that does not decode to one switchyard
// writes (ruleset.Decode) is kept as a ruleset.Unknown expression. exists
// is false when the table is missing.
func (n *NetlinkConn) ReadTable(ctx context.Context, fam ruleset.Family, table string) (t *ruleset.Table, exists bool, err error) {
	objs, exists, err := n.ListObjects(ctx, fam, table)
	if err != nil || !exists {
		return nil, exists, err
	}
	t = ruleset.NewTable(fam, table)
	if err := n.readChains(fam, t); err != nil {
		return nil, true, fmt.Errorf("reading chains: %w", err)
	}
	if err := n.readRules(fam, t); err != nil {
		return nil, true, fmt.Errorf("reading rules: %w", err)
	}
	if err := n.readSets(ctx, fam, t, objs.Sets); err != nil {
		return nil, true, err
	}
	return t, true, nil
}

// hookNames are the netfilter hook numbers (NF_INET_*).
var hookNames = map[uint32]string{0: "prerouting", 1: "input", 2: "forward", 3: "output", 4: "postrouting"}

// readChains dumps the table's chains with their hooks.
func (n *NetlinkConn) readChains(fam ruleset.Family, t *ruleset.Table) error {
	return n.dumpEach(unix.NFT_MSG_GETCHAIN, fam, []dumpAttr{{unix.NFTA_CHAIN_TABLE, t.Name}}, func(attrs []byte) error {
		c, owner := &ruleset.Chain{}, ""
		var hook ruleset.Hook
		hooked := false
		err := eachAttr(attrs, func(typ uint16, v []byte) {
			switch typ {
			case unix.NFTA_CHAIN_TABLE:
				owner = string(trimNUL(v))
			case unix.NFTA_CHAIN_NAME:
				c.Name = string(trimNUL(v))
			case unix.NFTA_CHAIN_TYPE:
				hook.Type = string(trimNUL(v))
			case unix.NFTA_CHAIN_HOOK:
				hooked = true
				_ = eachAttr(v, func(typ uint16, v []byte) { hookAttr(&hook, typ, v) })
			}
		})
		if owner == t.Name && c.Name != "" {
			if hooked {
				c.Hook = &hook
			}
			t.Chains[c.Name] = c
		}
		return err
	})
}

func hookAttr(h *ruleset.Hook, typ uint16, v []byte) {
	if len(v) != 4 {
		return
	}
	switch typ {
	case unix.NFTA_HOOK_HOOKNUM:
		h.Hook = hookNames[binary.BigEndian.Uint32(v)]
	case unix.NFTA_HOOK_PRIORITY:
		h.Priority = int(int32(binary.BigEndian.Uint32(v)))
	}
}

// readRules dumps the table's rules, in order, and decodes them.
func (n *NetlinkConn) readRules(fam ruleset.Family, t *ruleset.Table) error {
	return n.dumpEach(unix.NFT_MSG_GETRULE, fam, []dumpAttr{{unix.NFTA_RULE_TABLE, t.Name}}, func(attrs []byte) error {
		var owner, chain string
		var r ruleset.Rule
		var exprs []byte
		err := eachAttr(attrs, func(typ uint16, v []byte) {
			switch typ {
			case unix.NFTA_RULE_TABLE:
				owner = string(trimNUL(v))
			case unix.NFTA_RULE_CHAIN:
				chain = string(trimNUL(v))
			case unix.NFTA_RULE_EXPRESSIONS:
				exprs = v
			case unix.NFTA_RULE_USERDATA:
				r.Comment, _ = userdata.GetString(v, userdata.TypeComment)
			}
		})
		c, ok := t.Chains[chain]
		if err != nil || owner != t.Name || !ok {
			return err
		}
		r.Exprs = decodeRule(fam, exprs)
		c.Rules = append(c.Rules, r)
		return nil
	})
}

// decodeRule decodes a rule's expressions, or stands for it with
// ruleset.Unknown.
func decodeRule(fam ruleset.Family, list []byte) []ruleset.Expr {
	var names []string
	var in []expr.Any
	var failed error
	_ = eachAttr(list, func(typ uint16, elem []byte) {
		if typ != unix.NFTA_LIST_ELEM {
			return
		}
		var name string
		var data []byte
		_ = eachAttr(elem, func(typ uint16, v []byte) {
			switch typ {
			case unix.NFTA_EXPR_NAME:
				name = string(trimNUL(v))
			case unix.NFTA_EXPR_DATA:
				data = v
			}
		})
		names = append(names, name)
		e, err := ruleset.ParseExpr(fam, name, data)
		if err != nil && failed == nil {
			failed = err
		}
		in = append(in, e)
	})
	if failed == nil {
		var out []ruleset.Expr
		if out, failed = ruleset.Decode(fam, in); failed == nil {
			return out
		}
	}
	return []ruleset.Expr{ruleset.Unknown{Names: names, Reason: failed.Error()}}
}

// readSets reads each set's description and elements.
func (n *NetlinkConn) readSets(ctx context.Context, fam ruleset.Family, t *ruleset.Table, names []string) error {
	sets, err := n.readSetDescriptions(fam, t.Name)
	if err != nil {
		return fmt.Errorf("reading sets: %w", err)
	}
	for _, s := range sets {
		if !slices.Contains(names, s.Name) {
			continue
		}
		st := &ruleset.SetState{Set: s, Elements: map[string]ruleset.Element{}}
		err := n.ReadElements(ctx, fam, t.Name, s, func(e *ruleset.Element) {
			c := cloneElement(e)
			st.Elements[c.KeyText(s)] = c
		})
		if err != nil {
			return err
		}
		t.Sets[s.Name] = st
	}
	return nil
}

// cloneElement copies an element ReadElements hands out (it reuses it).
func cloneElement(e *ruleset.Element) ruleset.Element {
	c := ruleset.Element{Key: slices.Clone(e.Key), KeyEnd: slices.Clone(e.KeyEnd), Data: slices.Clone(e.Data)}
	if e.Verdict != nil {
		v := *e.Verdict
		c.Verdict = &v
	}
	return c
}

// readSetDescriptions dumps the table's sets: name, flags, the types of
// keys and data, size and comment, as ruleset.Set.
func (n *NetlinkConn) readSetDescriptions(fam ruleset.Family, table string) ([]*ruleset.Set, error) {
	var out []*ruleset.Set
	err := n.dumpEach(unix.NFT_MSG_GETSET, fam, []dumpAttr{{unix.NFTA_SET_TABLE, table}}, func(attrs []byte) error {
		var owner string
		var flags, keyType, dataType uint32
		s := &ruleset.Set{}
		err := eachAttr(attrs, func(typ uint16, v []byte) {
			switch typ {
			case unix.NFTA_SET_TABLE:
				owner = string(trimNUL(v))
			case unix.NFTA_SET_NAME:
				s.Name = string(trimNUL(v))
			case unix.NFTA_SET_FLAGS:
				flags = be32(v)
			case unix.NFTA_SET_KEY_TYPE:
				keyType = be32(v)
			case unix.NFTA_SET_DATA_TYPE:
				dataType = be32(v)
			case unix.NFTA_SET_USERDATA:
				s.Comment, _ = userdata.GetString(v, userdata.NFTNL_UDATA_SET_COMMENT)
			case unix.NFTA_SET_DESC:
				_ = eachAttr(v, func(typ uint16, v []byte) {
					if typ == unix.NFTA_SET_DESC_SIZE {
						s.Size = be32(v)
					}
				})
			}
		})
		if err == nil && owner == table && s.Name != "" {
			describeSet(s, flags, keyType, dataType)
			out = append(out, s)
		}
		return err
	})
	return out, err
}

func be32(v []byte) uint32 {
	if len(v) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

// verdictType is nft's datatype of verdicts in a map's data.
const verdictType = 0xffffff00

// describeSet fills a set's kind and fields from its flags and types.
func describeSet(s *ruleset.Set, flags, keyType, dataType uint32) {
	s.Interval = flags&unix.NFT_SET_INTERVAL != 0
	s.Dynamic = flags&(unix.NFT_SET_EVAL|unix.NFT_SET_TIMEOUT) != 0
	s.Key = fieldsOfType(keyType, s.Interval)
	switch {
	case flags&unix.NFT_SET_MAP == 0:
		s.Kind = ruleset.PlainSet
	case dataType == verdictType:
		s.Kind = ruleset.VerdictMap
	default:
		s.Kind, s.Data = ruleset.DataMap, fieldsOfType(dataType, false)
	}
}

// nft datatypes of the fields switchyard's sets use.
const (
	typeIPAddr      = 7
	typeIP6Addr     = 8
	typeInetProto   = 12
	typeInetService = 13
	typeMark        = 19
	concatTypeBits  = 6
)

// fieldsOfType splits a (concatenated) datatype into fields. Which
// address a set holds (source or destination) does not show in its type:
// both read and print alike. A 32-bit field of an interval map is an
// endpoint group's slot, elsewhere an identifier.
func fieldsOfType(t uint32, interval bool) ruleset.Fields {
	var out ruleset.Fields
	for ; t != 0; t >>= concatTypeBits {
		fl := ruleset.FieldID
		switch t & (1<<concatTypeBits - 1) {
		case typeIPAddr, typeIP6Addr:
			fl = ruleset.FieldDaddr
		case typeInetProto:
			fl = ruleset.FieldL4Proto
		case typeInetService:
			fl = ruleset.FieldDport
		case typeMark:
			if interval {
				fl = ruleset.FieldSlot
			}
		}
		out = append(ruleset.Fields{fl}, out...)
	}
	return out
}
