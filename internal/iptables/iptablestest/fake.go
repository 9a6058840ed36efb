package iptablestest

import (
	"context"
	"fmt"
	"sync"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// Fake is a strict, stateful runner.Interface. Safe for concurrent use.
type Fake struct {
	mu           sync.Mutex
	mode         string
	tables       map[runner.Family]map[string]*table
	restores     []RestoreCall
	failRestores int
}

var _ runner.Interface = (*Fake)(nil)

// RestoreCall is one recorded Restore.
type RestoreCall struct {
	Family runner.Family
	Data   []byte
	Err    error
}

// NewFake returns a fake with empty filter, nat, mangle and raw tables
// for both families, in nf_tables mode.
func NewFake() *Fake {
	f := &Fake{mode: runner.ModeNFT, tables: map[runner.Family]map[string]*table{}}
	for _, fam := range []runner.Family{runner.IPv4, runner.IPv6} {
		f.tables[fam] = map[string]*table{}
		for _, name := range tableNames() {
			f.tables[fam][name] = newTable(name)
		}
	}
	return f
}

// SetMode sets what Mode reports.
func (f *Fake) SetMode(mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
}

// Mode implements runner.Interface.
func (f *Fake) Mode() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode
}

// FailNextRestores makes the next n Restore calls fail without changing
// anything (fault injection). Their error wraps ErrInjected.
func (f *Fake) FailNextRestores(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failRestores = n
}

// Restores returns every Restore call so far, in order.
func (f *Fake) Restores() []RestoreCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]RestoreCall(nil), f.restores...)
}

// Restore implements runner.Interface.
func (f *Fake) Restore(ctx context.Context, fam runner.Family, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.restoreCallLocked(ctx, fam, data)
	f.restores = append(f.restores, RestoreCall{Family: fam, Data: append([]byte(nil), data...), Err: err})
	return err
}

func (f *Fake) restoreCallLocked(ctx context.Context, fam runner.Family, data []byte) error {
	if err := ctx.Err(); err != nil {
		return &runner.RestoreError{Err: err}
	}
	if _, ok := f.tables[fam]; !ok {
		return &runner.RestoreError{Err: fmt.Errorf("iptablestest: unknown family %q", fam)}
	}
	if f.failRestores > 0 {
		f.failRestores--
		return &runner.RestoreError{Stderr: "iptablestest: injected failure\n", Err: ErrInjected}
	}
	return f.restoreLocked(fam, data)
}

// SaveTable implements runner.Interface: the table's Dump.
func (f *Fake) SaveTable(ctx context.Context, fam runner.Family, tableName string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return nil, err
	}
	return []byte(dumpTable(t)), nil
}

func (f *Fake) tableLocked(fam runner.Family, tableName string) (*table, error) {
	tables, ok := f.tables[fam]
	if !ok {
		return nil, fmt.Errorf("iptablestest: unknown family %q", fam)
	}
	t, ok := tables[tableName]
	if !ok {
		return nil, fmt.Errorf("iptablestest: unknown table %q", tableName)
	}
	return t, nil
}

// update runs fn on a transaction of one table and commits it if fn
// succeeds.
func (f *Fake) update(fam runner.Family, tableName string, fn func(x *txn) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	base, err := f.tableLocked(fam, tableName)
	if err != nil {
		return err
	}
	x := newTxn(fam, base)
	if err := fn(x); err != nil {
		return err
	}
	if err := x.check(); err != nil {
		return err
	}
	f.tables[fam][tableName] = x.t
	return nil
}
