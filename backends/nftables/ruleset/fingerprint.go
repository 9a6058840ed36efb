package ruleset

import (
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Fingerprint identifies a rule by its nft text (which names every
// expression and value it holds): equal fingerprints mean equal rules.
// It is never zero.
func (r Rule) Fingerprint(f Family) uint64 {
	h := fnv.New64a()
	for _, e := range r.Exprs {
		_, _ = h.Write([]byte(e.Text(f)))
		_, _ = h.Write([]byte{0})
	}
	_, _ = h.Write([]byte(r.Comment))
	return h.Sum64() | 1
}

// ChainPrint folds the fingerprints of a chain's rules, in order, into
// one: a chain whose rules, read back from the kernel, fold to the print
// of the rules a sync renders for it holds exactly those rules.
type ChainPrint uint64

// EmptyChain is the print of a chain without rules.
const EmptyChain ChainPrint = 14695981039346656037

// Add folds the next rule's fingerprint in.
func (p ChainPrint) Add(rule uint64) ChainPrint {
	for i := range 8 {
		p ^= ChainPrint(byte(rule >> (8 * i)))
		p *= 1099511628211
	}
	return p
}

// PrintOf is the print of the rules of family f.
func PrintOf(f Family, rules []Rule) ChainPrint {
	p := EmptyChain
	for _, r := range rules {
		p = p.Add(r.Fingerprint(f))
	}
	return p
}

// Groups lists the endpoint groups the rules draw from (their DNAT
// statements' groups, where known).
func Groups(rules []Rule) []GroupRef {
	var out []GroupRef
	for _, r := range rules {
		if g, ok := r.Group(); ok {
			out = append(out, g)
		}
	}
	return out
}

// Group is the endpoint group the rule's DNAT draws from, if it names one.
func (r Rule) Group() (GroupRef, bool) {
	for _, e := range r.Exprs {
		if d, ok := e.(DNAT); ok && d.Group.Width != 0 {
			return d.Group, true
		}
	}
	return GroupRef{}, false
}

// ChainTag describes a chain to whoever reads the verdict that goes to
// it: the print of its rules and the endpoint groups they draw from. An
// element is replaced whenever its tag changes, in the transaction that
// changes the chain, so the tags a table holds describe its chains.
type ChainTag struct {
	Print  ChainPrint
	Groups []GroupRef
}

// TagOf is the tag of a chain holding rules of family f.
func TagOf(f Family, rules []Rule) *ChainTag {
	return &ChainTag{Print: PrintOf(f, rules), Groups: Groups(rules)}
}

// Equal tells whether two tags (either may be nil) are the same.
func (t *ChainTag) Equal(o *ChainTag) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.Print == o.Print && slices.Equal(t.Groups, o.Groups)
}

// Key is the tag as a short string, for comparisons ("" for nil).
func (t *ChainTag) Key() string {
	if t == nil {
		return ""
	}
	b := binary.BigEndian.AppendUint64(nil, uint64(t.Print))
	for _, g := range t.Groups {
		b = binary.BigEndian.AppendUint32(b, g.ID)
		b = binary.BigEndian.AppendUint32(b, g.Width)
		if g.Local {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	return string(b)
}
