package ipvs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
)

// syncSets makes the sets hold the model's entries. A full sync reads
// every set (`ipset save`), creates missing sets and adds and deletes
// entries by difference; a partial one adds or deletes the touched
// entries, after the repair lines of a verification (they bring the sets
// back to the previous sync's model; the touched lines, with -exist, move
// them on). One `ipset restore` applies it.
func (b *Backend) syncSets(ctx context.Context, t *touched, full bool, repair []string) (int, error) {
	var lines []string
	if full {
		var err error
		if lines, err = b.fullSetLines(ctx); err != nil {
			return 0, err
		}
	} else {
		for e := range t.entries {
			op := "del"
			if b.model.wantsEntry(e) {
				op = "add"
			}
			lines = append(lines, op+" "+e.Set+" "+e.Entry+" -exist")
		}
		slices.Sort(lines)
		lines = append(slices.Clone(repair), lines...)
	}
	if len(lines) == 0 {
		return 0, nil
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	if err := b.k.IPSet.Restore(ctx, data); err != nil {
		return 0, fmt.Errorf("ipset restore: %w", err)
	}
	return len(lines), nil
}

func (b *Backend) fullSetLines(ctx context.Context) ([]string, error) {
	saved, err := b.k.IPSet.Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("ipset save: %w", err)
	}
	have, err := ipset.ParseSave(saved)
	if err != nil {
		return nil, fmt.Errorf("ipset save: %w", err)
	}
	want := map[string][]string{}
	for e := range b.model.entries {
		want[e.Set] = append(want[e.Set], e.Entry)
	}
	var lines []string
	for _, f := range b.cfg.families() {
		for _, kind := range allSets() {
			ls, err := setLines(kind, f, have[kind.name(f)], want[kind.name(f)])
			if err != nil {
				return nil, err
			}
			lines = append(lines, ls...)
		}
	}
	return lines, nil
}

// setLines creates the set if needed and diffs its entries.
func setLines(kind setKind, f v1.IPFamily, have *ipset.Set, want []string) ([]string, error) {
	name := kind.name(f)
	var lines []string
	var present map[string]struct{}
	switch {
	case have == nil:
		lines = append(lines, kind.createLine(f))
	case have.Type != kind.typ || (kind.typ != ipset.BitmapPort && have.Family != ipsetFamily(f)):
		return nil, fmt.Errorf("set %s exists as %s %s, want %s %s (run --cleanup)", name, have.Type, have.Family, kind.typ, ipsetFamily(f))
	default:
		present = have.Entries
	}
	wanted := make(map[string]bool, len(want))
	slices.Sort(want)
	for _, e := range want {
		wanted[e] = true
		if _, ok := present[e]; !ok {
			lines = append(lines, "add "+name+" "+e+" -exist")
		}
	}
	var stale []string
	for e := range present {
		if !wanted[e] {
			stale = append(stale, "del "+name+" "+e+" -exist")
		}
	}
	slices.Sort(stale)
	return append(lines, stale...), nil
}
