package ruleset

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Family is an nf_tables address family: "ip" or "ip6".
type Family string

// The families switchyard programs.
const (
	IPv4 Family = "ip"
	IPv6 Family = "ip6"
)

// AddrLen is the length of an address of the family in bytes.
func (f Family) AddrLen() int {
	if f == IPv6 {
		return 16
	}
	return 4
}

// AddrType is the nft type name of an address of the family.
func (f Family) AddrType() string {
	if f == IPv6 {
		return "ipv6_addr"
	}
	return "ipv4_addr"
}

// Hook attaches a base chain to a netfilter hook.
type Hook struct {
	Type     string // "nat" or "filter"
	Hook     string // "prerouting", "output", "postrouting", "input", "forward"
	Priority int
}

// String gives the nft chain header, e.g.
// "type nat hook prerouting priority -100; policy accept;".
func (h Hook) String() string {
	return fmt.Sprintf("type %s hook %s priority %d; policy accept;", h.Type, h.Hook, h.Priority)
}

// Chain is a chain and its rules. Hook is nil for a regular chain.
type Chain struct {
	Name  string
	Hook  *Hook
	Rules []Rule
}

// Rule is a list of expressions evaluated left to right, with an optional
// comment.
type Rule struct {
	Exprs   []Expr
	Comment string
}

// R builds a rule from expressions.
func R(exprs ...Expr) Rule { return Rule{Exprs: exprs} }

// WithComment returns the rule with a comment.
func (r Rule) WithComment(c string) Rule { r.Comment = c; return r }

// Text is the rule in nft syntax for family f.
func (r Rule) Text(f Family) string {
	parts := make([]string, 0, len(r.Exprs)+1)
	for _, e := range r.Exprs {
		parts = append(parts, e.Text(f))
	}
	if r.Comment != "" {
		parts = append(parts, fmt.Sprintf("comment %q", r.Comment))
	}
	return strings.Join(parts, " ")
}

// ChainText is the chain's rules, one per line, for fingerprints and
// dumps.
func (c *Chain) ChainText(f Family) string {
	var b strings.Builder
	if c.Hook != nil {
		b.WriteString(c.Hook.String())
		b.WriteByte('\n')
	}
	for _, r := range c.Rules {
		b.WriteString(r.Text(f))
		b.WriteByte('\n')
	}
	return b.String()
}

// Field is one component of a set key, map data or concatenation.
type Field int

// Fields used by switchyard's rules and sets.
const (
	FieldSaddr   Field = iota // ip saddr / ip6 saddr
	FieldDaddr                // ip daddr / ip6 daddr
	FieldL4Proto              // meta l4proto
	FieldDport                // th dport
	FieldSlot                 // numgen random mod SlotSpace (host order on the wire, converted)
	FieldID                   // a 32-bit identifier (endpoint group)
)

// Len is the field's length in bytes for family f.
func (fl Field) Len(f Family) int {
	switch fl {
	case FieldSaddr, FieldDaddr:
		return f.AddrLen()
	case FieldL4Proto:
		return 1
	case FieldDport:
		return 2
	}
	return 4
}

// regs is the number of 32-bit registers the field occupies.
func (fl Field) regs(f Family) int { return (fl.Len(f) + 3) / 4 }

// Text is the field as an nft selector.
func (fl Field) Text(f Family) string {
	switch fl {
	case FieldSaddr:
		return string(f) + " saddr"
	case FieldDaddr:
		return string(f) + " daddr"
	case FieldL4Proto:
		return "meta l4proto"
	case FieldDport:
		return "th dport"
	case FieldSlot:
		return fmt.Sprintf("numgen random mod %d", SlotSpace)
	}
	return "meta mark"
}

// TypeName is the field's nft datatype name.
func (fl Field) TypeName(f Family) string {
	switch fl {
	case FieldSaddr, FieldDaddr:
		return f.AddrType()
	case FieldL4Proto:
		return "inet_proto"
	case FieldDport:
		return "inet_service"
	}
	return "mark"
}

// SlotSpace is the number of slots of one endpoint group: a packet draws a
// slot uniformly (numgen random mod SlotSpace) and the group's interval
// map sends each slot range to one endpoint.
const SlotSpace = 1 << 16

// Fields is a concatenation of fields.
type Fields []Field

// Len is the key length in bytes, each field padded to 4 bytes.
func (fs Fields) Len(f Family) int {
	n := 0
	for _, fl := range fs {
		n += fl.regs(f) * 4
	}
	return n
}

// Text gives "ip daddr . meta l4proto . th dport".
func (fs Fields) Text(f Family) string {
	parts := make([]string, len(fs))
	for i, fl := range fs {
		parts[i] = fl.Text(f)
	}
	return strings.Join(parts, " . ")
}

// Value is one component of an element key or data. Exactly one of the
// fields is meaningful, according to the Field it belongs to.
type Value struct {
	Addr netip.Addr
	Num  uint32 // protocol number, port, slot or identifier
}

// Text formats the value for the field.
func (v Value) Text(fl Field) string {
	switch fl {
	case FieldSaddr, FieldDaddr:
		return v.Addr.String()
	case FieldL4Proto:
		return protoName(uint8(v.Num))
	}
	return fmt.Sprint(v.Num)
}

func protoName(p uint8) string {
	switch p {
	case ProtoTCP:
		return "tcp"
	case ProtoUDP:
		return "udp"
	case ProtoSCTP:
		return "sctp"
	}
	return fmt.Sprint(p)
}

// IP protocol numbers.
const (
	ProtoTCP  = 6
	ProtoUDP  = 17
	ProtoSCTP = 132
)

// SetKind says what a set's elements map to.
type SetKind int

// Set kinds.
const (
	PlainSet   SetKind = iota // membership only
	DataMap                   // key -> data fields
	VerdictMap                // key -> verdict (jump/goto chain, drop, ...)
)

// Set is a named set or map.
type Set struct {
	Name string
	Kind SetKind
	Key  Fields
	Data Fields // DataMap only
	// Interval: keys are ranges (one field only).
	Interval bool
	// Dynamic: updated from the packet path with a timeout per element.
	Dynamic bool
	// Size bounds a dynamic set.
	Size uint32
	// Comment is shown by nft.
	Comment string
	// Counter gives every element a counter of the packets and bytes
	// that matched it in a lookup (nft "counter" in the set; kernel
	// 5.11+): per-Service traffic counts (--service-traffic-metrics).
	Counter bool
}

// Verdict is a verdict map's data.
type Verdict struct {
	Kind  string // "goto", "jump", "drop", "accept", "return"
	Chain string
}

// Text gives "goto chain" or "drop".
func (v Verdict) Text() string {
	if v.Chain == "" {
		return v.Kind
	}
	return v.Kind + " " + v.Chain
}

// Element is one element of a set or map. For an interval set Key holds
// the first and KeyEnd the last value of the range (inclusive).
type Element struct {
	Key     []Value
	KeyEnd  []Value
	Data    []Value
	Verdict *Verdict
	// Tag describes the chain the verdict goes to (kept in the element's
	// userdata, not shown by nft); nil when it does not.
	Tag *ChainTag
	// Counter is an element of a counter set (Set.Counter): its comment,
	// and, read back from the kernel, its counts; nil otherwise.
	Counter *ElementCounter
}

// ElementCounter is what an element of a counter set carries besides its
// key: a comment naming what it counts (written; nft shows it), and the
// packets and bytes counted so far (read only).
type ElementCounter struct {
	Comment        string
	Packets, Bytes uint64
}

// KeyText is the element key as nft prints it.
func (e *Element) KeyText(s *Set) string {
	k := valuesText(s.Key, e.Key)
	if s.Interval && e.KeyEnd != nil {
		end := valuesText(s.Key, e.KeyEnd)
		if end != k {
			k += "-" + end
		}
	}
	return k
}

// Text is the element as nft prints it inside "elements = { ... }".
func (e *Element) Text(s *Set) string {
	k := e.KeyText(s)
	switch {
	case e.Verdict != nil:
		return k + " : " + e.Verdict.Text()
	case s.Kind == DataMap:
		return k + " : " + valuesText(s.Data, e.Data)
	case e.Counter != nil && e.Counter.Comment != "":
		return fmt.Sprintf("%s comment %q", k, e.Counter.Comment)
	}
	return k
}

func valuesText(fs Fields, vs []Value) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		fl := FieldID
		if i < len(fs) {
			fl = fs[i]
		}
		parts[i] = v.Text(fl)
	}
	return strings.Join(parts, " . ")
}

// TypeText is the set's type line: "type ... : ..." or "typeof ..." when
// a component has no nft type name (the numgen slot).
func (s *Set) TypeText(f Family) string {
	key := typeNames(s.Key, f)
	if slices.Contains(s.Key, FieldSlot) {
		key = "typeof " + s.Key.Text(f)
	} else {
		key = "type " + key
	}
	switch s.Kind {
	case VerdictMap:
		return key + " : verdict"
	case DataMap:
		if strings.HasPrefix(key, "typeof") {
			return key + " : " + dataTypeof(s.Data, f)
		}
		return key + " : " + typeNames(s.Data, f)
	}
	return key
}

func typeNames(fs Fields, f Family) string {
	parts := make([]string, len(fs))
	for i, fl := range fs {
		parts[i] = fl.TypeName(f)
	}
	return strings.Join(parts, " . ")
}

// dataTypeof spells endpoint data (address . port) as nft's typeof needs.
func dataTypeof(fs Fields, f Family) string {
	parts := make([]string, len(fs))
	for i, fl := range fs {
		parts[i] = fl.Text(f)
		if fl == FieldSaddr {
			parts[i] = string(f) + " daddr"
		}
	}
	return strings.Join(parts, " . ")
}

func (s *Set) flagsText() string {
	var fl []string
	if s.Dynamic {
		fl = append(fl, "dynamic", "timeout")
	}
	if s.Interval {
		fl = append(fl, "interval")
	}
	return strings.Join(fl, ",")
}
