package nftables

import (
	"encoding/binary"
	"fmt"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/userdata"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// batch translates operations into netlink messages: google/nftables
// builds those of tables, chains, rules and sets; element messages are
// written straight into the wire (elements, below), with the tags
// google/nftables has no field for.
type batch struct {
	c     *gnft.Conn
	fam   ruleset.Family
	table *gnft.Table
	sets  map[string]*gnft.Set
	// flush moves the messages google/nftables holds into the wire, so
	// that an element message written there comes after them.
	flush func() error
	wire  *nfnetlink.Batch
	// scratch and the slices below are reused by every element.
	scratch        nfnetlink.Element
	verdict        nfnetlink.Verdict
	key, end, data []byte
}

func (b *batch) add(o *ruleset.Op) error {
	switch o.Kind {
	case ruleset.OpAddTable:
		b.c.AddTable(b.table)
	case ruleset.OpDeleteTable:
		b.c.DelTable(b.table)
	case ruleset.OpAddChain:
		b.c.AddChain(b.chain(o.Chain))
	case ruleset.OpFlushChain:
		b.c.FlushChain(&gnft.Chain{Name: o.Name, Table: b.table})
	case ruleset.OpDeleteChain:
		b.c.DelChain(&gnft.Chain{Name: o.Name, Table: b.table})
	case ruleset.OpAddRule:
		return b.rule(o.Name, o.Rule)
	case ruleset.OpAddSet:
		s := b.set(o.Set)
		b.sets[s.Name] = s
		return b.c.AddSet(s, nil)
	case ruleset.OpFlushSet:
		b.c.FlushSet(&gnft.Set{Name: o.Name, Table: b.table})
	case ruleset.OpDeleteSet:
		b.c.DelSet(&gnft.Set{Name: o.Name, Table: b.table})
	case ruleset.OpAddElements, ruleset.OpDeleteElements:
		return b.elements(o)
	default:
		return fmt.Errorf("unknown operation %v", o.Kind)
	}
	return nil
}

var hookNums = map[string]*gnft.ChainHook{
	"prerouting": gnft.ChainHookPrerouting, "input": gnft.ChainHookInput, "forward": gnft.ChainHookForward,
	"output": gnft.ChainHookOutput, "postrouting": gnft.ChainHookPostrouting,
}

func (b *batch) chain(c *ruleset.Chain) *gnft.Chain {
	ch := &gnft.Chain{Name: c.Name, Table: b.table}
	if h := c.Hook; h != nil {
		policy := gnft.ChainPolicyAccept
		prio := gnft.ChainPriority(h.Priority)
		ch.Type, ch.Hooknum, ch.Priority, ch.Policy = gnft.ChainType(h.Type), hookNums[h.Hook], &prio, &policy
	}
	return ch
}

func (b *batch) rule(chain string, r ruleset.Rule) error {
	exprs, err := r.Compile(b.fam)
	if err != nil {
		return err
	}
	nr := &gnft.Rule{Table: b.table, Chain: &gnft.Chain{Name: chain, Table: b.table}, Exprs: exprs}
	if r.Comment != "" {
		nr.UserData = userdata.AppendString(nil, userdata.TypeComment, r.Comment)
	}
	b.c.AddRule(nr)
	return nil
}

// set describes a set to the kernel. It is named by the operations on
// it; the properties matter only where the set is created. As nft does,
// only an interval set with a concatenated key is flagged a concatenation:
// the kernel refuses nft's "add map" of an existing set whose flags
// differ, and kube-proxy adds the maps it shares with us that way.
func (b *batch) set(s *ruleset.Set) *gnft.Set {
	ns := &gnft.Set{
		Table: b.table, Name: s.Name, IsMap: s.Kind != ruleset.PlainSet,
		Interval: s.Interval, Dynamic: s.Dynamic, HasTimeout: s.Dynamic,
		Concatenation: s.Interval && len(s.Key) > 1, Size: s.Size, Comment: s.Comment, Counter: s.Counter,
		KeyType: setType(b.fam, s.Key),
	}
	if s.Interval {
		ns.KeyByteOrder = binaryutil.BigEndian
	}
	switch s.Kind {
	case ruleset.VerdictMap:
		ns.DataType = gnft.TypeVerdict
	case ruleset.DataMap:
		ns.DataType = setType(b.fam, s.Data)
	}
	return ns
}

func setType(f ruleset.Family, fs ruleset.Fields) gnft.SetDatatype {
	types := make([]gnft.SetDatatype, len(fs))
	for i, fl := range fs {
		switch fl {
		case ruleset.FieldSaddr, ruleset.FieldDaddr:
			types[i] = gnft.TypeIPAddr
			if f == ruleset.IPv6 {
				types[i] = gnft.TypeIP6Addr
			}
		case ruleset.FieldL4Proto:
			types[i] = gnft.TypeInetProto
		case ruleset.FieldDport:
			types[i] = gnft.TypeInetService
		default:
			// A fixed-size 32-bit type: nft gives "integer" no size
			// and cannot print a lookup whose key is such a value.
			types[i] = gnft.TypeMark
		}
	}
	if len(types) == 1 {
		return types[0]
	}
	return gnft.MustConcatSetType(types...)
}

// appendValues lays values out as the registers hold them: an address in
// network order; the protocol byte and the port (network order) each
// zero-padded to 4 bytes, as meta and payload loads leave them; slots and
// group identifiers big-endian.
func appendValues(out []byte, fs ruleset.Fields, vs []ruleset.Value) []byte {
	for i, v := range vs {
		switch fs[i] {
		case ruleset.FieldSaddr, ruleset.FieldDaddr:
			if v.Addr.Is4() {
				a := v.Addr.As4()
				out = append(out, a[:]...)
			} else {
				a := v.Addr.As16()
				out = append(out, a[:]...)
			}
		case ruleset.FieldL4Proto:
			out = append(out, uint8(v.Num), 0, 0, 0)
		case ruleset.FieldDport:
			out = append(out, uint8(v.Num>>8), uint8(v.Num), 0, 0)
		default:
			out = binary.BigEndian.AppendUint32(out, v.Num)
		}
	}
	return out
}

// elements writes an element operation into the wire
// (nfnetlink.Batch.Elements), after the messages google/nftables holds.
func (b *batch) elements(o *ruleset.Op) error {
	if err := b.flush(); err != nil {
		return err
	}
	add := o.Kind == ruleset.OpAddElements
	return b.wire.Elements(nfproto(b.fam), b.table.Name, o.Name, add, len(o.Elements), func(i int) *nfnetlink.Element {
		return b.element(o.Set, &o.Elements[i], add)
	})
}

// element lays one element out in the batch's scratch element: its
// values as the registers hold them (appendValues), an interval's end
// one past its last value, an addition's data and tag.
func (b *batch) element(s *ruleset.Set, e *ruleset.Element, add bool) *nfnetlink.Element {
	b.key = appendValues(b.key[:0], s.Key, e.Key)
	x := &b.scratch
	*x = nfnetlink.Element{Key: b.key}
	if e.KeyEnd != nil {
		b.end = binary.BigEndian.AppendUint32(b.end[:0], e.KeyEnd[0].Num+1)
		x.End = b.end
	}
	if !add {
		return x
	}
	switch {
	case e.Verdict != nil:
		b.verdict = nfnetlink.Verdict{Code: nfnetlink.VerdictCode(e.Verdict.Kind), Chain: e.Verdict.Chain}
		x.Verdict = &b.verdict
	case len(e.Data) > 0:
		b.data = appendValues(b.data[:0], s.Data, e.Data)
		x.Data = b.data
	}
	if e.Tag != nil {
		x.Userdata = tagUserdata(e.Tag)
	} else if e.Counter != nil && e.Counter.Comment != "" {
		x.Userdata = commentUserdata(e.Counter.Comment)
	}
	return x
}
