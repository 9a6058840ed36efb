package sweep

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// Result is what Run removed from one family.
type Result struct {
	Family runner.Family
	Tables []TableResult
}

// Chains is the number of chains removed.
func (r Result) Chains() int {
	n := 0
	for _, t := range r.Tables {
		n += len(t.Deleted)
	}
	return n
}

// Jumps is the number of built-in chain rules removed.
func (r Result) Jumps() int {
	n := 0
	for _, t := range r.Tables {
		n += t.Jumps
	}
	return n
}

// Kept lists the leftover chains kept as "table/chain".
func (r Result) Kept() []string {
	var out []string
	for _, t := range r.Tables {
		for _, c := range t.Kept {
			out = append(out, t.Table+"/"+c)
		}
	}
	return out
}

// Run lists every table of the family and removes its leftover chains,
// each table in one atomic restore. A family without iptables tools
// returns an error wrapping runner.ErrFamilyUnavailable at once. A table that fails to list or restore
// is reported and the others still run; Result holds what was removed.
func Run(ctx context.Context, r runner.Interface, fam runner.Family, owned Owner) (Result, error) {
	res := Result{Family: fam}
	var errs []error
	for _, table := range Tables() {
		save, err := r.SaveTable(ctx, fam, table)
		if err != nil {
			if errors.Is(err, runner.ErrFamilyUnavailable) {
				return res, err
			}
			errs = append(errs, fmt.Errorf("sweep %s %s: %w", fam, table, err))
			continue
		}
		data, tr := Plan(table, save, owned)
		if data != nil {
			if err := r.Restore(ctx, fam, data); err != nil {
				errs = append(errs, fmt.Errorf("sweep %s %s: %w", fam, table, err))
				continue
			}
		}
		res.Tables = append(res.Tables, tr)
	}
	return res, errors.Join(errs...)
}
