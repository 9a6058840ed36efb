package ipvs

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
)

// iptablesApplier writes the companion chains (Kernel.IPTables), one
// iptables-restore per family, and reads them back: rule counts and the
// jumps from the built-in chains, without iptables-save where the runner
// can. It keeps, per family, what it last wrote and the kernel's write
// counter after it.
type iptablesApplier struct {
	r    runner.Interface
	cfg  *Config
	fams map[v1.IPFamily]*iptablesFamily
}

// iptablesFamily is what the backend knows of one family's iptables.
type iptablesFamily struct {
	// written is the payload of the last successful restore; nil before
	// the first one and after a failed one.
	written []byte
	// stamp is the write counter after our last sync, while it is known
	// to be ours (reconcile.Stamp's rule).
	stamp reconcile.Stamp
}

// fingerprint is one family's runner.Fingerprinter value: the nf_tables
// generation (any commit by any program bumps it) or the legacy tables'
// entry counts and sizes. ok is false when it cannot be read.
type fingerprint struct {
	value uint64
	ok    bool
}

func newIPTablesApplier(r runner.Interface, cfg *Config) *iptablesApplier {
	a := &iptablesApplier{r: r, cfg: cfg, fams: map[v1.IPFamily]*iptablesFamily{}}
	for _, f := range cfg.families() {
		a.fams[f] = &iptablesFamily{}
	}
	return a
}

// forget drops what was written and the stamps (Backend.reset).
func (a *iptablesApplier) forget() {
	for _, st := range a.fams {
		*st = iptablesFamily{}
	}
}

// forgetStamps drops the stamps after a failed sync: the next check
// compares.
func (a *iptablesApplier) forgetStamps() {
	for _, st := range a.fams {
		st.stamp = reconcile.Stamp{}
	}
}

// sync restores our chains of each family when the payload (rules.go)
// changed, on a full sync, or when a verification found them changed
// (repair); a full sync or a repair also inserts, in the same
// transaction, the jumps from the built-in chains that iptables-save
// does not show. It reports whether it wrote.
func (a *iptablesApplier) sync(ctx context.Context, payloads map[v1.IPFamily][]byte, full bool, repair map[v1.IPFamily]bool) (bool, error) {
	wrote := false
	for _, f := range a.cfg.families() {
		st, data := a.fams[f], payloads[f]
		rewrite := full || repair[f]
		if !rewrite && bytes.Equal(data, st.written) {
			continue
		}
		send := data
		if rewrite {
			missing, err := a.missingJumps(ctx, f)
			if err != nil {
				return wrote, err
			}
			send = withJumps(data, missing)
		}
		if err := a.r.Restore(ctx, runnerFamily(f), send); err != nil {
			klog.ErrorS(err, "iptables-restore failed", "family", f, "lines", runner.OffendingLines(send, err))
			st.written = nil
			return wrote, fmt.Errorf("iptables %s: %w", f, err)
		}
		st.written = data
		wrote = true
	}
	return wrote, nil
}

// missingJumps lists the jumps no rule of the built-in chain makes yet.
func (a *iptablesApplier) missingJumps(ctx context.Context, f v1.IPFamily) ([]jump, error) {
	present := map[string]bool{}
	for _, table := range []string{"nat", "filter"} {
		data, err := a.r.SaveTable(ctx, runnerFamily(f), table)
		if err != nil {
			return nil, fmt.Errorf("iptables %s: %w", f, err)
		}
		for _, r := range runner.ParseSave(data).Rules {
			present[table+"/"+r.Chain+"/"+r.Target] = true
		}
	}
	var missing []jump
	for _, j := range jumps() {
		if !present[j.table+"/"+j.from+"/"+j.to()] {
			missing = append(missing, j)
		}
	}
	return missing, nil
}

// fingerprints reads every family's fingerprint; a sync reads them
// before it writes anything.
func (a *iptablesApplier) fingerprints(ctx context.Context) map[v1.IPFamily]fingerprint {
	out := map[v1.IPFamily]fingerprint{}
	fr, ok := a.r.(runner.Fingerprinter)
	if !ok {
		return out
	}
	for _, f := range a.cfg.families() {
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
// stamp was recorded.
func (a *iptablesApplier) untouched(f v1.IPFamily, now fingerprint) bool {
	return a.fams[f].stamp.Untouched(now.value, now.ok)
}

// recordStamps notes, after a successful sync, the fingerprint of each
// family by reconcile.Stamp's rule: known after a full sync, a
// verification, or when nobody else wrote since the last record (before
// holds the values read before this sync wrote).
func (a *iptablesApplier) recordStamps(ctx context.Context, before map[v1.IPFamily]fingerprint, d *damage, full bool) {
	after := a.fingerprints(ctx)
	for _, f := range a.cfg.families() {
		known := full || (d != nil && d.checked[f]) || a.untouched(f, before[f])
		a.fams[f].stamp.Record(after[f].value, after[f].ok, known)
	}
}

// verify compares the family's chains and the jumps to them with what
// was last written, unless the fingerprint shows no other writer (like
// the iptables mode, without iptables-save); a family that differs gets
// its restore and missing jumps again.
func (a *iptablesApplier) verify(ctx context.Context, f v1.IPFamily, now fingerprint, d *damage) {
	written := a.fams[f].written
	if written == nil {
		return // the last restore failed: this sync rewrites it anyway
	}
	if a.untouched(f, now) {
		d.checked[f] = true
		return
	}
	found, err := a.differences(ctx, f, written)
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

// differences lists what the family's tables lost or changed of the
// payload written: a chain gone or holding another number of rules, a
// jump from a built-in chain gone (`iptables -F` flushes those too).
func (a *iptablesApplier) differences(ctx context.Context, f v1.IPFamily, written []byte) ([]string, error) {
	want := runner.PayloadRuleCounts(written)
	var found []string
	for _, table := range []string{"filter", "nat"} {
		ours := filterChains
		if table == "nat" {
			ours = natChains
		}
		counts, err := a.countRules(ctx, f, table, ours)
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
func (a *iptablesApplier) countRules(ctx context.Context, f v1.IPFamily, table string, ours []string) (*runner.TableCounts, error) {
	r, fam := a.r, runnerFamily(f)
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

// cleanup deletes, in one restore, every rule of a built-in chain that
// jumps to one of our chains, then flushes and deletes our chains.
func (a *iptablesApplier) cleanup(ctx context.Context, f v1.IPFamily) error {
	var payload strings.Builder
	for _, table := range []string{"filter", "nat"} {
		data, err := a.r.SaveTable(ctx, runnerFamily(f), table)
		if err != nil {
			return fmt.Errorf("cleanup %s: %w", f, err)
		}
		payload.WriteString(cleanupSection(table, runner.ParseSave(data)))
	}
	if payload.Len() == 0 {
		return nil
	}
	if err := a.r.Restore(ctx, runnerFamily(f), []byte(payload.String())); err != nil {
		return fmt.Errorf("cleanup %s: %w", f, err)
	}
	return nil
}

// cleanupSection is the restore text that removes our chains of one
// table and the jumps to them ("" when there are none).
func cleanupSection(table string, saved runner.Saved) string {
	ours := natChains
	if table == "filter" {
		ours = filterChains
	}
	var lines, present []string
	for _, r := range saved.Rules {
		if !slices.Contains(ours, r.Chain) && slices.Contains(ours, r.Target) {
			lines = append(lines, r.DeleteLine())
		}
	}
	for _, c := range ours {
		if slices.Contains(saved.Chains, c) {
			present = append(present, c)
		}
	}
	if len(lines) == 0 && len(present) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("*" + table + "\n")
	for _, c := range present {
		b.WriteString(":" + c + " - [0:0]\n") // flushes it
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	for _, c := range present {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

func runnerFamily(f v1.IPFamily) runner.Family {
	if f == v1.IPv6Protocol {
		return runner.IPv6
	}
	return runner.IPv4
}
