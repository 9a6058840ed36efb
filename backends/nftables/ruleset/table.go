package ruleset

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Table is the content of one nf_tables table, as a model of the kernel's:
// the strict fake keeps one per family and applies transactions to it.
type Table struct {
	Family Family
	Name   string
	Chains map[string]*Chain
	Sets   map[string]*SetState
}

// SetState is a set and its elements, by KeyText.
type SetState struct {
	Set      *Set
	Elements map[string]Element
}

// NewTable returns an empty table.
func NewTable(f Family, name string) *Table {
	return &Table{Family: f, Name: name, Chains: map[string]*Chain{}, Sets: map[string]*SetState{}}
}

// Clone returns a deep enough copy for a transaction to modify.
func (t *Table) Clone() *Table {
	c := NewTable(t.Family, t.Name)
	for n, ch := range t.Chains {
		cp := *ch
		cp.Rules = slices.Clone(ch.Rules)
		c.Chains[n] = &cp
	}
	for n, s := range t.Sets {
		c.Sets[n] = &SetState{Set: s.Set, Elements: maps.Clone(s.Elements)}
	}
	return c
}

// Lookup implements Env.
func (t *Table) Lookup(set string, key []Value) (*Element, bool) {
	s, ok := t.Sets[set]
	if !ok {
		return nil, false
	}
	if !s.Set.Interval {
		e, ok := s.Elements[valuesText(s.Set.Key, key)]
		return &e, ok
	}
	for _, e := range s.Elements {
		if key[0].Num >= e.Key[0].Num && key[0].Num <= e.KeyEnd[0].Num {
			return &e, true
		}
	}
	return nil, false
}

// Elements implements Env.
func (t *Table) Elements(set string) ([]Element, bool) {
	s, ok := t.Sets[set]
	if !ok {
		return nil, false
	}
	return slices.Collect(maps.Values(s.Elements)), true
}

// Dump is the table in nft syntax, sets and chains sorted by name and
// elements sorted, so that equal contents give equal text.
func (t *Table) Dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", t.Family, t.Name)
	for _, n := range slices.Sorted(maps.Keys(t.Sets)) {
		t.dumpSet(&b, t.Sets[n])
	}
	for _, n := range slices.Sorted(maps.Keys(t.Chains)) {
		c := t.Chains[n]
		fmt.Fprintf(&b, "\tchain %s {\n", c.Name)
		if c.Hook != nil {
			fmt.Fprintf(&b, "\t\t%s\n", c.Hook)
		}
		for _, r := range c.Rules {
			fmt.Fprintf(&b, "\t\t%s\n", r.Text(t.Family))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func (t *Table) dumpSet(b *strings.Builder, s *SetState) {
	kind := "set"
	if s.Set.Kind != PlainSet {
		kind = "map"
	}
	fmt.Fprintf(b, "\t%s %s {\n\t\t%s\n", kind, s.Set.Name, s.Set.TypeText(t.Family))
	if flags := s.Set.flagsText(); flags != "" {
		fmt.Fprintf(b, "\t\tflags %s\n", flags)
	}
	if s.Set.Counter {
		b.WriteString("\t\tcounter\n")
	}
	if s.Set.Size > 0 {
		fmt.Fprintf(b, "\t\tsize %d\n", s.Set.Size)
	}
	if s.Set.Comment != "" {
		fmt.Fprintf(b, "\t\tcomment %q\n", s.Set.Comment)
	}
	if len(s.Elements) > 0 {
		els := make([]string, 0, len(s.Elements))
		for _, e := range s.sortedElements() {
			els = append(els, e.Text(s.Set))
		}
		fmt.Fprintf(b, "\t\telements = { %s }\n", strings.Join(els, ",\n\t\t\t     "))
	}
	b.WriteString("\t}\n")
}

// sortedElements orders elements by key (numerically for numbers).
func (s *SetState) sortedElements() []Element {
	els := slices.Collect(maps.Values(s.Elements))
	slices.SortFunc(els, func(a, b Element) int { return compareValues(a.Key, b.Key) })
	return els
}

func compareValues(a, b []Value) int {
	for i := range min(len(a), len(b)) {
		if c := a[i].Addr.Compare(b[i].Addr); c != 0 {
			return c
		}
		if a[i].Num != b[i].Num {
			if a[i].Num < b[i].Num {
				return -1
			}
			return 1
		}
	}
	return len(a) - len(b)
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
