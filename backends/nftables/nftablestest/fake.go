package nftablestest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// Fake is a strict, stateful stand-in for the kernel's nf_tables: it keeps
// the tables, applies each transaction atomically (all or nothing),
// rejects what the kernel would (see ruleset.Table.ApplyOp), counts
// generations like the kernel, and dumps canonical text.
type Fake struct {
	mu      sync.Mutex
	tables  map[tableKey]*ruleset.Table
	foreign map[tableKey]bool
	gen     uint32
	// Transactions records every committed transaction, in order.
	Transactions []*ruleset.Transaction
	// FailNext, when set, makes the next Run fail with it and commit
	// nothing (as a kernel rejecting a batch would).
	FailNext error
	// staged is what Append staged for the next Run.
	staged *ruleset.Transaction
}

// Append implements nftables.Conn: the operations wait for the next Run.
func (f *Fake) Append(_ context.Context, tx *ruleset.Transaction) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.staged == nil {
		f.staged = ruleset.NewTransaction(tx.Family, tx.Table)
	} else if f.staged.Family != tx.Family || f.staged.Table != tx.Table {
		f.staged = nil
		return fmt.Errorf("a transaction on %s %s after operations staged on another table", tx.Family, tx.Table)
	}
	f.staged.Ops = append(f.staged.Ops, tx.Ops...)
	return nil
}

// Discard implements nftables.Conn.
func (f *Fake) Discard() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.staged = nil
}

type tableKey struct {
	family ruleset.Family
	name   string
}

var _ nftables.Conn = (*Fake)(nil)

// NewFake returns an empty fake.
func NewFake() *Fake {
	return &Fake{tables: map[tableKey]*ruleset.Table{}, foreign: map[tableKey]bool{}}
}

// SetForeign marks an existing table as another program's (as if it
// carried a comment), until a transaction deletes it.
func (f *Fake) SetForeign(fam ruleset.Family, table string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.foreign[tableKey{fam, table}] = true
}

// Run implements nftables.Conn.
func (f *Fake) Run(_ context.Context, tx *ruleset.Transaction) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if staged := f.staged; staged != nil {
		f.staged = nil
		if staged.Family != tx.Family || staged.Table != tx.Table {
			return fmt.Errorf("a transaction on %s %s after operations staged on another table", tx.Family, tx.Table)
		}
		whole := ruleset.NewTransaction(tx.Family, tx.Table)
		whole.Ops = append(staged.Ops, tx.Ops...)
		tx = whole
	}
	if err := f.FailNext; err != nil {
		f.FailNext = nil
		return err
	}
	key := tableKey{tx.Family, tx.Table}
	t := f.tables[key]
	if t != nil {
		t = t.Clone()
	}
	for i := range tx.Ops {
		op := &tx.Ops[i]
		switch op.Kind {
		case ruleset.OpAddTable:
			if t == nil {
				t = ruleset.NewTable(tx.Family, tx.Table)
			}
			continue
		case ruleset.OpDeleteTable:
			if t == nil {
				return fmt.Errorf("delete table %s %s: %w", tx.Family, tx.Table, ruleset.ErrNotFound)
			}
			t = nil
			continue
		}
		if t == nil {
			return fmt.Errorf("%s: table %s %s: %w", op.String(), tx.Family, tx.Table, ruleset.ErrNotFound)
		}
		if err := t.ApplyOp(op); err != nil {
			return fmt.Errorf("operation %d: %w", i, err)
		}
	}
	if t == nil {
		delete(f.tables, key)
	} else {
		f.tables[key] = t
	}
	if slices.ContainsFunc(tx.Ops, func(o ruleset.Op) bool { return o.Kind == ruleset.OpDeleteTable }) {
		delete(f.foreign, key)
	}
	f.gen++
	f.Transactions = append(f.Transactions, tx)
	return nil
}

// ListObjects implements nftables.Conn.
func (f *Fake) ListObjects(_ context.Context, fam ruleset.Family, table string) (nftables.TableObjects, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[tableKey{fam, table}]
	if t == nil {
		return nftables.TableObjects{}, false, nil
	}
	return nftables.TableObjects{
		Chains:  slices.Sorted(maps.Keys(t.Chains)),
		Sets:    slices.Sorted(maps.Keys(t.Sets)),
		Foreign: f.foreign[tableKey{fam, table}],
	}, true, nil
}

// ReadElements implements nftables.Conn.
func (f *Fake) ReadElements(_ context.Context, fam ruleset.Family, table string, s *ruleset.Set, fn func(*ruleset.Element)) error {
	f.mu.Lock()
	var els []ruleset.Element
	found := false
	if t := f.tables[tableKey{fam, table}]; t != nil && t.Sets[s.Name] != nil {
		found, els = true, slices.Collect(maps.Values(t.Sets[s.Name].Elements))
	}
	f.mu.Unlock()
	if !found {
		return fmt.Errorf("set %s of %s %s: %w", s.Name, fam, table, ruleset.ErrNotFound)
	}
	for i := range els {
		fn(&els[i])
	}
	return nil
}

// Counts implements nftables.Conn.
func (f *Fake) Counts(_ context.Context, fam ruleset.Family, table string) (nftables.TableCounts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[tableKey{fam, table}]
	if t == nil {
		return nftables.TableCounts{}, fmt.Errorf("table %s %s: %w", fam, table, ruleset.ErrNotFound)
	}
	c := nftables.TableCounts{Rules: map[string]int{}, Elements: map[string]int{}}
	for n, ch := range t.Chains {
		c.Rules[n] = len(ch.Rules)
	}
	for n, s := range t.Sets {
		c.Elements[n] = len(s.Elements)
	}
	return c, nil
}

// Generation implements nftables.Conn.
func (f *Fake) Generation(context.Context) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, nil
}

// Table returns a copy of a table, or nil.
func (f *Fake) Table(fam ruleset.Family, name string) *ruleset.Table {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t := f.tables[tableKey{fam, name}]; t != nil {
		return t.Clone()
	}
	return nil
}

// Dump is the canonical text of a table ("" if it does not exist).
func (f *Fake) Dump(fam ruleset.Family, name string) string {
	if t := f.Table(fam, name); t != nil {
		return t.Dump()
	}
	return ""
}

// Tamper runs fn on a table as another program would: outside any
// transaction of the backend, bumping the generation.
func (f *Fake) Tamper(fam ruleset.Family, name string, fn func(t *ruleset.Table)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.tables[tableKey{fam, name}])
	f.gen++
}

// DeleteTable removes a table as `nft delete table` would.
func (f *Fake) DeleteTable(fam ruleset.Family, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tables, tableKey{fam, name})
	f.gen++
}

// CountTraffic adds packets and bytes to the counter of the element with
// key in a counter set (ruleset.Set.Counter), as the kernel does for each
// packet whose lookup matches it. It fails when there is no such element.
func (f *Fake) CountTraffic(fam ruleset.Family, table, set string, key []ruleset.Value, packets, bytes uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tables[tableKey{fam, table}]
	if t == nil || t.Sets[set] == nil || !t.Sets[set].Set.Counter {
		return fmt.Errorf("counter set %s of %s %s: %w", set, fam, table, ruleset.ErrNotFound)
	}
	s := t.Sets[set]
	k := ruleset.Element{Key: key}
	e, ok := s.Elements[k.KeyText(s.Set)]
	if !ok || e.Counter == nil {
		return fmt.Errorf("element %s of %s: %w", k.KeyText(s.Set), set, ruleset.ErrNotFound)
	}
	c := *e.Counter // the committed transaction's element stays as written
	c.Packets += packets
	c.Bytes += bytes
	e.Counter = &c
	s.Elements[k.KeyText(s.Set)] = e
	return nil
}
