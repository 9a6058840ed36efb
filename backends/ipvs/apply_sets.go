package ipvs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
)

// setApplier writes and reads back the sets the companion rules match
// (Kernel.IPSet): one `ipset restore` per sync.
type setApplier struct {
	h   ipset.Interface
	cfg *Config
}

// sync makes the sets hold the model's entries. A full sync reads every
// set (`ipset save`), creates missing sets and adds and deletes entries
// by difference; a partial one adds or deletes the touched entries, after
// the repair lines of a verification (they bring the sets back to the
// previous sync's model; the touched lines, with -exist, move them on).
// One `ipset restore` applies it. It returns the number of lines.
func (a setApplier) sync(ctx context.Context, m *model, t *touched, full bool, repair []string) (int, error) {
	var lines []string
	if full {
		var err error
		if lines, err = a.diff(ctx, m); err != nil {
			return 0, err
		}
	} else {
		lines = append(slices.Clone(repair), touchedSetLines(m, t)...)
	}
	if len(lines) == 0 {
		return 0, nil
	}
	data := []byte(strings.Join(lines, "\n") + "\n")
	if err := a.h.Restore(ctx, data); err != nil {
		return 0, fmt.Errorf("ipset restore: %w", err)
	}
	return len(lines), nil
}

// touchedSetLines adds or deletes each touched entry, sorted.
func touchedSetLines(m *model, t *touched) []string {
	var lines []string
	for e := range t.entries {
		op := "del"
		if m.wantsEntry(e) {
			op = "add"
		}
		lines = append(lines, op+" "+e.Set+" "+e.Entry+" -exist")
	}
	slices.Sort(lines)
	return lines
}

// diff reads every set (`ipset save`) and returns the restore lines that
// make the kernel's sets the model's.
func (a setApplier) diff(ctx context.Context, m *model) ([]string, error) {
	saved, err := a.h.Save(ctx)
	if err != nil {
		return nil, fmt.Errorf("ipset save: %w", err)
	}
	have, err := ipset.ParseSave(saved)
	if err != nil {
		return nil, fmt.Errorf("ipset save: %w", err)
	}
	want := map[string][]string{}
	for e := range m.entries {
		want[e.Set] = append(want[e.Set], e.Entry)
	}
	var lines []string
	for _, f := range a.cfg.families() {
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

// verify compares every set's member count (`ipset list -terse`) with
// the model's; only when one moved it diffs the sets as a full sync does
// (`ipset save`), and the lines that put them back go into this sync's
// restore.
func (a setApplier) verify(ctx context.Context, m *model, d *damage) error {
	counts, err := a.h.Counts(ctx)
	if err != nil {
		return err
	}
	moved := false
	for _, f := range a.cfg.families() {
		for _, kind := range allSets() {
			n, ok := counts[kind.name(f)]
			moved = moved || !ok || n != m.setCounts[kind.name(f)]
		}
	}
	if !moved {
		return nil
	}
	lines, err := a.diff(ctx, m)
	if err != nil {
		return err
	}
	d.setLines = lines
	stats := setStats(lines)
	for _, f := range a.cfg.families() {
		for _, kind := range allSets() {
			d.note(kindIPSet, f, stats[kind.name(f)].describe(kind.name(f))...)
		}
	}
	return nil
}

// setStat sums up the restore lines of one set.
type setStat struct {
	created  bool
	add, del int
}

func setStats(lines []string) map[string]*setStat {
	out := map[string]*setStat{}
	for _, l := range lines {
		op, rest, _ := strings.Cut(l, " ")
		name, _, _ := strings.Cut(rest, " ")
		st := out[name]
		if st == nil {
			st = &setStat{}
			out[name] = st
		}
		switch op {
		case "create":
			st.created = true
		case "add":
			st.add++
		case "del":
			st.del++
		}
	}
	return out
}

// describe says what the set lost or gained (nil: nothing).
func (st *setStat) describe(name string) []string {
	if st == nil {
		return nil
	}
	var out []string
	if st.created {
		out = append(out, fmt.Sprintf("set %s is gone", name))
	}
	if st.add > 0 {
		out = append(out, fmt.Sprintf("set %s lacks %d entries", name, st.add))
	}
	if st.del > 0 {
		out = append(out, fmt.Sprintf("set %s holds %d entries not written", name, st.del))
	}
	return out
}

// cleanup destroys the sets of every family that exist (a set still
// referenced by someone else's rule cannot go: that is reported).
func (a setApplier) cleanup(ctx context.Context) error {
	saved, err := a.h.Save(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: ipset save: %w", err)
	}
	have, err := ipset.ParseSave(saved)
	if err != nil {
		return fmt.Errorf("cleanup: ipset save: %w", err)
	}
	var data []byte
	for _, f := range a.cfg.families() {
		for _, kind := range allSets() {
			if _, ok := have[kind.name(f)]; ok {
				data = append(data, "destroy "+kind.name(f)+"\n"...)
			}
		}
	}
	if len(data) == 0 {
		return nil
	}
	if err := a.h.Restore(ctx, data); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
