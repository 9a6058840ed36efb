package nftables

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// readTable reads a whole table back from the kernel, for `switchyard
// explain`: chains with their hooks and rules, sets and maps with their
// elements. It only reads. A rule that does not decode to one switchyard
// writes (ruleset.Decode) is kept as a ruleset.Unknown expression. exists
// is false when the table is missing.
func readTable(ctx context.Context, q *netlinkReader, fam ruleset.Family, table string) (t *ruleset.Table, exists bool, err error) {
	objs, exists, err := q.ListObjects(ctx, fam, table)
	if err != nil || !exists {
		return nil, exists, err
	}
	t = ruleset.NewTable(fam, table)
	if err := readChains(q, fam, t); err != nil {
		return nil, true, fmt.Errorf("reading chains: %w", err)
	}
	if err := readRules(q, fam, t); err != nil {
		return nil, true, fmt.Errorf("reading rules: %w", err)
	}
	if err := readTableSets(ctx, q, fam, t, objs.Sets); err != nil {
		return nil, true, err
	}
	return t, true, nil
}

// hookNames are the netfilter hook numbers (NF_INET_*).
var hookNames = map[uint32]string{0: "prerouting", 1: "input", 2: "forward", 3: "output", 4: "postrouting"}

// readChains dumps the table's chains with their hooks.
func readChains(q *netlinkReader, fam ruleset.Family, t *ruleset.Table) error {
	return q.dumpEach(unix.NFT_MSG_GETCHAIN, fam, tableAttr(unix.NFTA_CHAIN_TABLE, t.Name), func(attrs []byte) error {
		nc, err := nfnetlink.ParseChain(attrs)
		if nc.Table == t.Name && nc.Name != "" {
			c := &ruleset.Chain{Name: nc.Name}
			if h := nc.Hook; h != nil {
				c.Hook = &ruleset.Hook{Type: h.Type, Hook: hookNames[h.Num], Priority: int(h.Priority)}
			}
			t.Chains[c.Name] = c
		}
		return err
	})
}

func tableAttr(typ uint16, table string) []nfnetlink.StringAttr {
	return []nfnetlink.StringAttr{{Type: typ, Value: table}}
}

// readRules dumps the table's rules, in order, and decodes them.
func readRules(q *netlinkReader, fam ruleset.Family, t *ruleset.Table) error {
	return q.dumpEach(unix.NFT_MSG_GETRULE, fam, tableAttr(unix.NFTA_RULE_TABLE, t.Name), func(attrs []byte) error {
		nr, err := nfnetlink.ParseRule(attrs)
		c, ok := t.Chains[nr.Chain]
		if err != nil || nr.Table != t.Name || !ok {
			return err
		}
		c.Rules = append(c.Rules, ruleset.Rule{Comment: nr.Comment, Exprs: decodeRule(fam, nr.Exprs)})
		return nil
	})
}

// decodeRule decodes a rule's expressions, or stands for it with
// ruleset.Unknown.
func decodeRule(fam ruleset.Family, list []byte) []ruleset.Expr {
	var names []string
	var in []expr.Any
	var failed error
	_ = nfnetlink.EachExpr(list, func(name string, data []byte) {
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

// readTableSets reads each set's description and elements.
func readTableSets(ctx context.Context, q *netlinkReader, fam ruleset.Family, t *ruleset.Table, names []string) error {
	sets, err := readSetDescriptions(q, fam, t.Name)
	if err != nil {
		return fmt.Errorf("reading sets: %w", err)
	}
	for _, s := range sets {
		if !slices.Contains(names, s.Name) {
			continue
		}
		st := &ruleset.SetState{Set: s, Elements: map[string]ruleset.Element{}}
		err := q.ReadElements(ctx, fam, t.Name, s, func(e *ruleset.Element) {
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
func readSetDescriptions(q *netlinkReader, fam ruleset.Family, table string) ([]*ruleset.Set, error) {
	var out []*ruleset.Set
	err := q.dumpEach(unix.NFT_MSG_GETSET, fam, tableAttr(unix.NFTA_SET_TABLE, table), func(attrs []byte) error {
		ns, err := nfnetlink.ParseSet(attrs)
		if err == nil && ns.Table == table && ns.Name != "" {
			s := &ruleset.Set{Name: ns.Name, Size: ns.Size, Comment: ns.Comment}
			describeSet(s, ns.Flags, ns.KeyType, ns.DataType)
			out = append(out, s)
		}
		return err
	})
	return out, err
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
