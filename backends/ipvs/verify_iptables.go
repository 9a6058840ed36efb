package ipvs

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// fingerprint is one family's runner.Fingerprinter value: the nf_tables
// generation (any commit by any program bumps it) or the legacy tables'
// entry counts and sizes. ok is false when it cannot be read.
type fingerprint struct {
	value uint64
	ok    bool
}

// readFingerprints reads every family's fingerprint, before this sync
// writes anything.
func (b *Backend) readFingerprints(ctx context.Context) map[v1.IPFamily]fingerprint {
	out := map[v1.IPFamily]fingerprint{}
	fr, ok := b.k.IPTables.(runner.Fingerprinter)
	if !ok {
		return out
	}
	for _, f := range b.cfg.families() {
		v, err := fr.Fingerprint(ctx, runnerFamily(f))
		if err != nil {
			klog.V(4).InfoS("Cannot read the iptables fingerprint; verifying by counting", "family", f, "err", err)
			continue
		}
		out[f] = fingerprint{value: v, ok: true}
	}
	return out
}

// untouched reports whether nobody wrote the family's rules since the
// fingerprint was recorded.
func (b *Backend) untouched(f v1.IPFamily, now fingerprint) bool {
	return b.fp[f].Untouched(now.value, now.ok)
}

// recordFingerprints notes, after a successful sync, the fingerprint of
// each family by reconcile.Stamp's rule: known after a full sync, a
// verification, or when nobody else wrote since the last record (before
// holds the values read before this sync wrote).
func (b *Backend) recordFingerprints(ctx context.Context, before map[v1.IPFamily]fingerprint, d *damage, full bool) {
	after := b.readFingerprints(ctx)
	for _, f := range b.cfg.families() {
		known := full || (d != nil && d.checked[f]) || b.untouched(f, before[f])
		s := b.fp[f]
		s.Record(after[f].value, after[f].ok, known)
		b.fp[f] = s
	}
}

// verifyIPTables compares the family's chains and the jumps to them with
// what was last written, unless the fingerprint shows no other writer.
func (b *Backend) verifyIPTables(ctx context.Context, f v1.IPFamily, now fingerprint, d *damage) {
	written, ok := b.lastPayload[f]
	if !ok {
		return // the last restore failed: this sync rewrites it anyway
	}
	if b.untouched(f, now) {
		d.checked[f] = true
		return
	}
	found, err := b.iptablesDifferences(ctx, f, written)
	if err != nil {
		klog.V(2).InfoS("Cannot verify iptables chains; will retry", "family", f, "err", err)
		return
	}
	d.checked[f] = true
	if len(found) > 0 {
		d.iptables[f] = true
		d.note(kindIPTables, f, found...)
	}
}

// iptablesDifferences lists what the family's tables lost or changed of
// the payload written: a chain gone or holding another number of rules, a
// jump from a built-in chain gone (`iptables -F` flushes those too).
func (b *Backend) iptablesDifferences(ctx context.Context, f v1.IPFamily, written []byte) ([]string, error) {
	want := runner.PayloadRuleCounts(written)
	var found []string
	for _, table := range []string{"filter", "nat"} {
		ours := filterChains
		if table == "nat" {
			ours = natChains
		}
		counts, err := b.countRules(ctx, f, table, ours)
		if err != nil {
			return nil, err
		}
		for _, chain := range ours {
			n, exists := counts.Rules[chain]
			switch {
			case !exists:
				found = append(found, fmt.Sprintf("%s chain %s/%s is gone", f, table, chain))
			case n != want[runner.TableChain{Table: table, Chain: chain}]:
				found = append(found, fmt.Sprintf("%s chain %s/%s holds %d rules, %d were written",
					f, table, chain, n, want[runner.TableChain{Table: table, Chain: chain}]))
			}
		}
		for _, j := range jumps() {
			if j.table == table && !slices.Contains(counts.Jumps[j.from], j.to()) {
				found = append(found, fmt.Sprintf("%s jump %s/%s -> %s is gone", f, table, j.from, j.to()))
			}
		}
	}
	return found, nil
}

// countRules reads the rule counts of our chains and the jumps of the
// built-in chains without iptables-save where the runner can: one
// IPT_SO_GET_ENTRIES read of the table on legacy iptables; on
// iptables-nft one dump of the family's chains (existence) and one of
// each chain counted. Otherwise it saves the table (small in this mode).
func (b *Backend) countRules(ctx context.Context, f v1.IPFamily, table string, ours []string) (*runner.TableCounts, error) {
	r, fam := b.k.IPTables, runnerFamily(f)
	if rc, ok := r.(runner.RuleCounter); ok && r.Mode() == runner.ModeLegacy {
		return rc.CountRules(ctx, fam, table)
	}
	if ur, ok := r.(runner.ChainUseReader); ok && r.Mode() == runner.ModeNFT {
		uses, err := ur.ChainUses(ctx, fam)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, c := range slices.Concat(ours, []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}) {
			if _, ok := uses[table][c]; ok {
				names = append(names, c)
			}
		}
		return ur.CountChainRules(ctx, fam, table, names)
	}
	data, err := r.SaveTable(ctx, fam, table)
	if err != nil {
		return nil, fmt.Errorf("iptables %s: %w", f, err)
	}
	return countSaved(data), nil
}

// countSaved reads rule counts and built-in jumps from iptables-save.
func countSaved(data []byte) *runner.TableCounts {
	saved := runner.ParseSave(data)
	out := &runner.TableCounts{Rules: map[string]int{}, Jumps: map[string][]string{}}
	for _, c := range saved.Chains {
		out.Rules[c] = 0
	}
	for _, r := range saved.Rules {
		out.Rules[r.Chain]++
		if runner.IsBuiltinChain(r.Chain) && r.Target != "" {
			out.Jumps[r.Chain] = append(out.Jumps[r.Chain], r.Target)
		}
	}
	return out
}
