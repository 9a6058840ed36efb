package nftables

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/klog/v2"
)

// verify reports whether the table still holds what was written. It is
// cheap when nothing happened: if the ruleset generation is the one after
// our last commit, no program committed anything since. Otherwise it
// counts the rules of every chain and the elements of every set (one
// dump each) and compares them with what was written: a deleted table, a
// flushed chain or a deleted element shows up as a difference, and the
// caller then rewrites everything.
func (f *familySync) verify(ctx context.Context, conn Conn) (bool, error) {
	gen, err := conn.Generation(ctx)
	if f.stamp.Untouched(uint64(gen), err == nil) {
		return true, nil
	}
	if _, exists, err := conn.ListObjects(ctx, f.fc.nft, TableName); err != nil {
		return false, fmt.Errorf("listing table: %w", err)
	} else if !exists {
		klog.InfoS("nftables table is gone; rewriting it", "family", f.fc.nft, "table", TableName)
		return false, nil
	}
	counts, err := conn.Counts(ctx, f.fc.nft, TableName)
	if err != nil {
		return false, fmt.Errorf("counting table contents: %w", err)
	}
	if what := f.mismatch(counts); what != "" {
		klog.InfoS("nftables table differs from what was written; rewriting it", "family", f.fc.nft, "difference", what)
		return false, nil
	}
	f.stamp.Record(uint64(gen), true, true)
	return true, nil
}

// untouched reports whether the ruleset generation is still the one after
// our last commit: nobody else committed since. (A commit racing between
// this read and ours is taken for ours.)
func (f *familySync) untouched(ctx context.Context, conn Conn) bool {
	gen, err := conn.Generation(ctx)
	return f.stamp.Untouched(uint64(gen), err == nil)
}

// mismatch names the first difference between the counts and what was
// written, or "".
func (f *familySync) mismatch(c TableCounts) string {
	found, first := 0, ""
	for name, got := range c.Rules {
		n, ok := f.w.rules.get(name)
		if !ok {
			continue
		}
		found++
		if got != n && (first == "" || name < first) {
			first = name
		}
	}
	if first != "" {
		n, _ := f.w.rules.get(first)
		return fmt.Sprintf("chain %s has %d rules, %d written", first, c.Rules[first], n)
	}
	if found < len(f.w.rules) {
		return fmt.Sprintf("%d of the %d chains written are gone", len(f.w.rules)-found, len(f.w.rules))
	}
	for _, name := range slices.Sorted(maps.Keys(f.w.counts)) {
		if got, n := c.Elements[name], f.w.counts[name]; got != n {
			return fmt.Sprintf("set %s has %d elements, %d written", name, got, n)
		}
	}
	return ""
}
