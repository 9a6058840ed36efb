package ruleset

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
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

// Trace walks a new connection's first packet through the table's base
// chains as the kernel would: the prerouting chains (output when fromNode:
// the node's own packet), by priority, then nat postrouting towards the
// endpoint it was DNATed to. local are the node's addresses (fib ... type
// local). Only this table is walked: other tables on the same hooks are
// not seen.
func (t *Table) Trace(p Packet, local []netip.Addr, fromNode bool) (TraceResult, error) {
	tr := &tracer{env: traceEnv{Table: t, local: local}}
	hook := "prerouting"
	if fromNode {
		hook = "output"
	}
	paths := []tracePath{{pkt: p, prob: 1}}
	for _, hk := range []string{hook, "postrouting"} {
		var err error
		if paths, err = tr.hook(hk, paths); err != nil {
			return TraceResult{}, err
		}
	}
	return tr.result(paths), nil
}

// Errors the strict model returns, as the kernel would (ENOENT, EEXIST,
// EBUSY, EINVAL).
var (
	ErrNotFound = errors.New("no such object")
	ErrExists   = errors.New("object exists")
	ErrBusy     = errors.New("object in use")
	ErrInvalid  = errors.New("invalid argument")
)

// ApplyOp applies one operation to the table in place. Callers apply a
// transaction to a Clone and keep it only if every operation succeeds.
func (t *Table) ApplyOp(o *Op) error {
	var err error
	switch o.Kind {
	case OpAddChain:
		err = t.addChain(o.Chain)
	case OpFlushChain:
		err = t.withChain(o.Name, func(c *Chain) error { c.Rules = nil; return nil })
	case OpDeleteChain:
		err = t.deleteChain(o.Name)
	case OpAddRule:
		err = t.addRule(o.Name, o.Rule)
	case OpAddSet:
		err = t.addSet(o.Set)
	case OpFlushSet:
		err = t.withSet(o.Name, func(s *SetState) error { s.Elements = map[string]Element{}; return nil })
	case OpDeleteSet:
		err = t.deleteSet(o.Name)
	case OpAddElements:
		err = t.withSet(o.Name, func(s *SetState) error { return t.addElements(s, o.Elements) })
	case OpDeleteElements:
		err = t.withSet(o.Name, func(s *SetState) error { return deleteElements(s, o.Elements) })
	default:
		err = fmt.Errorf("%w: operation %v on a table", ErrInvalid, o.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", o.String(), err)
	}
	return nil
}

func (t *Table) withChain(name string, fn func(*Chain) error) error {
	c, ok := t.Chains[name]
	if !ok {
		return fmt.Errorf("chain %s: %w", name, ErrNotFound)
	}
	return fn(c)
}

func (t *Table) withSet(name string, fn func(*SetState) error) error {
	s, ok := t.Sets[name]
	if !ok {
		return fmt.Errorf("set %s: %w", name, ErrNotFound)
	}
	return fn(s)
}

func (t *Table) addChain(c *Chain) error {
	if old, ok := t.Chains[c.Name]; ok {
		if (old.Hook == nil) != (c.Hook == nil) || (old.Hook != nil && *old.Hook != *c.Hook) {
			return fmt.Errorf("chain %s exists with another hook: %w", c.Name, ErrExists)
		}
		return nil
	}
	t.Chains[c.Name] = &Chain{Name: c.Name, Hook: c.Hook}
	return nil
}

func (t *Table) deleteChain(name string) error {
	return t.withChain(name, func(c *Chain) error {
		if len(c.Rules) > 0 {
			return fmt.Errorf("chain %s has %d rules: %w", name, len(c.Rules), ErrBusy)
		}
		if by := t.chainReferrer(name); by != "" {
			return fmt.Errorf("chain %s is referenced by %s: %w", name, by, ErrBusy)
		}
		delete(t.Chains, name)
		return nil
	})
}

// chainReferrer names a rule or map element that jumps to the chain.
func (t *Table) chainReferrer(name string) string {
	for _, c := range t.Chains {
		for _, r := range c.Rules {
			if slices0(r.Exprs, func(e Expr) bool { d, ok := e.(Do); return ok && d.Chain == name }) {
				return "a rule of chain " + c.Name
			}
		}
	}
	for _, s := range t.Sets {
		for _, e := range s.Elements {
			if e.Verdict != nil && e.Verdict.Chain == name {
				return "an element of map " + s.Set.Name
			}
		}
	}
	return ""
}

func slices0(es []Expr, fn func(Expr) bool) bool {
	for _, e := range es {
		if fn(e) {
			return true
		}
	}
	return false
}

func (t *Table) addRule(chain string, r Rule) error {
	return t.withChain(chain, func(c *Chain) error {
		for _, e := range r.Exprs {
			if err := t.checkExpr(c, e); err != nil {
				return err
			}
		}
		c.Rules = append(c.Rules, r)
		return nil
	})
}

// checkExpr rejects what the kernel would: references to missing chains
// or sets, keys of the wrong length, a map used as the wrong kind.
func (t *Table) checkExpr(c *Chain, e Expr) error {
	switch x := e.(type) {
	case Do:
		if x.Chain != "" {
			if _, ok := t.Chains[x.Chain]; !ok {
				return fmt.Errorf("%s: chain %s: %w", x.Text(t.Family), x.Chain, ErrNotFound)
			}
		}
	case Lookup:
		return t.checkSetUse(x.Set, x.Key, PlainSet)
	case VMap:
		return t.checkSetUse(x.Map, x.Key, VerdictMap)
	case DNAT:
		return t.checkEndpointMap(x.Map)
	case Update:
		s, ok := t.Sets[x.Set]
		if !ok || !s.Set.Dynamic || s.Set.Kind != PlainSet || s.Set.Key.Len(t.Family) != x.Key.Len(t.Family) {
			return fmt.Errorf("update of %s, not a dynamic set keyed by %s: %w", x.Set, x.Key.Text(t.Family), ErrInvalid)
		}
	case Reject:
		if c.Hook != nil && c.Hook.Type != "filter" {
			return fmt.Errorf("reject in a %s chain: %w", c.Hook.Type, ErrInvalid)
		}
	}
	return nil
}

func (t *Table) checkSetUse(name string, key Fields, kind SetKind) error {
	s, ok := t.Sets[name]
	if !ok {
		return fmt.Errorf("set %s: %w", name, ErrNotFound)
	}
	if s.Set.Key.Len(t.Family) != key.Len(t.Family) {
		return fmt.Errorf("set %s: key of %d bytes looked up with %d: %w", name, s.Set.Key.Len(t.Family), key.Len(t.Family), ErrInvalid)
	}
	if kind == VerdictMap && s.Set.Kind != VerdictMap {
		return fmt.Errorf("set %s is not a verdict map: %w", name, ErrInvalid)
	}
	return nil
}

func (t *Table) checkEndpointMap(name string) error {
	s, ok := t.Sets[name]
	if !ok {
		return fmt.Errorf("map %s: %w", name, ErrNotFound)
	}
	if s.Set.Kind != DataMap || !s.Set.Interval || len(s.Set.Data) != 2 {
		return fmt.Errorf("map %s is not an interval map to address . port: %w", name, ErrInvalid)
	}
	return nil
}

func (t *Table) addSet(s *Set) error {
	if old, ok := t.Sets[s.Name]; ok {
		if old.Set.TypeText(t.Family) != s.TypeText(t.Family) || old.Set.flagsText() != s.flagsText() {
			return fmt.Errorf("set %s exists with another type: %w", s.Name, ErrExists)
		}
		return nil
	}
	if s.Interval && len(s.Key) != 1 {
		return fmt.Errorf("interval set %s with a concatenated key: %w", s.Name, ErrInvalid)
	}
	t.Sets[s.Name] = &SetState{Set: s, Elements: map[string]Element{}}
	return nil
}

func (t *Table) deleteSet(name string) error {
	return t.withSet(name, func(*SetState) error {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if ruleUsesSet(r, name) {
					return fmt.Errorf("set %s is used by chain %s: %w", name, c.Name, ErrBusy)
				}
			}
		}
		delete(t.Sets, name)
		return nil
	})
}

func ruleUsesSet(r Rule, name string) bool {
	return slices0(r.Exprs, func(e Expr) bool {
		switch x := e.(type) {
		case Lookup:
			return x.Set == name
		case VMap:
			return x.Map == name
		case DNAT:
			return x.Map == name
		case Update:
			return x.Set == name
		}
		return false
	})
}

func (t *Table) addElements(s *SetState, els []Element) error {
	for i := range els {
		e := &els[i]
		if err := t.checkElement(s.Set, e); err != nil {
			return err
		}
		k := e.KeyText(s.Set)
		if _, ok := s.Elements[k]; ok {
			return fmt.Errorf("element %s: %w", k, ErrExists)
		}
		if s.Set.Interval {
			if o, ok := overlapping(s, e); ok {
				return fmt.Errorf("element %s overlaps %s: %w", k, o, ErrExists)
			}
		}
		s.Elements[k] = *e
	}
	return nil
}

func (t *Table) checkElement(s *Set, e *Element) error {
	if len(e.Key) != len(s.Key) || (s.Interval && len(e.KeyEnd) != 1) {
		return fmt.Errorf("element key of %d fields for set %s: %w", len(e.Key), s.Name, ErrInvalid)
	}
	switch s.Kind {
	case DataMap:
		if len(e.Data) != len(s.Data) {
			return fmt.Errorf("element %s: data of %d fields for map %s: %w", e.KeyText(s), len(e.Data), s.Name, ErrInvalid)
		}
	case VerdictMap:
		if e.Verdict == nil {
			return fmt.Errorf("element %s: no verdict for map %s: %w", e.KeyText(s), s.Name, ErrInvalid)
		}
		if c := e.Verdict.Chain; c != "" {
			if _, ok := t.Chains[c]; !ok {
				return fmt.Errorf("element %s: chain %s: %w", e.KeyText(s), c, ErrNotFound)
			}
		}
	}
	for i, v := range e.Key {
		if fl := s.Key[i]; (fl == FieldSaddr || fl == FieldDaddr) && (!v.Addr.IsValid() || v.Addr.BitLen() != t.Family.AddrLen()*8) {
			return fmt.Errorf("element %s: address %v not of family %s: %w", e.KeyText(s), v.Addr, t.Family, ErrInvalid)
		}
	}
	return nil
}

func overlapping(s *SetState, e *Element) (string, bool) {
	lo, hi := e.Key[0].Num, e.KeyEnd[0].Num
	if hi < lo {
		return "itself (empty range)", true
	}
	for k, o := range s.Elements {
		if lo <= o.KeyEnd[0].Num && o.Key[0].Num <= hi {
			return k, true
		}
	}
	return "", false
}

func deleteElements(s *SetState, els []Element) error {
	for i := range els {
		k := els[i].KeyText(s.Set)
		if _, ok := s.Elements[k]; !ok {
			return fmt.Errorf("element %s of %s: %w", k, s.Set.Name, ErrNotFound)
		}
		delete(s.Elements, k)
	}
	return nil
}
