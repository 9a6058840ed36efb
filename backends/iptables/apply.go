package iptables

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/synctrace"
)

// The kernel I/O of one family's sync: the restore transactions a sync
// planned (sync.go), the jumps from the built-in chains, and Cleanup.

// apply runs the transactions in order, recording each one that
// committed. It stops at the first failure: the transactions before it
// committed, ordering kept every reference valid, and the rules in force
// are a consistent mix of old and new.
func (f *familySync) apply(ctx context.Context, b *Backend, txs []*transaction, written map[table]int, partial bool) error {
	for i, tx := range txs {
		tx.byName = b.runner.Mode() == runner.ModeLegacy
		payload, err := restore(ctx, b.runner, f.fam, tx)
		if err != nil {
			b.countRestoreFailure(f.fc.family, partial)
			klog.ErrorS(err, "iptables-restore failed", "family", f.fam, "transaction", i+1, "of", len(txs),
				"partial", partial, "lines", runner.OffendingLinesFrom(payload, err))
			if !f.commitWithoutDeletes(ctx, b.runner, tx, payload, err) {
				f.installed.recordUncertain(tx)
				return fmt.Errorf("iptables backend: %s: restore %d of %d: %w", f.fam, i+1, len(txs), err)
			}
		} else {
			f.installed.record(tx)
		}
		for t, n := range tx.rulesWritten() {
			written[t] += n
		}
	}
	return nil
}

// restore runs one transaction and returns what writes its payload
// again, for the lines a failure blames. A runner that can is given the
// payload's pieces as they are rendered (streamedPayload): the payload of
// a first sync is as big as the rules it is written from, and was held
// beside them (10k services x 10 endpoints: ~40 MB), plus a copy in a
// memfd.
func restore(ctx context.Context, r runner.Interface, fam runner.Family, tx *transaction) (io.WriterTo, error) {
	if sr, ok := r.(runner.StreamRestorer); ok {
		// The render mark is the time to the first byte; the payload is
		// rendered while iptables-restore reads it, under "commit".
		synctrace.Mark(ctx, "render")
		p := streamedPayload{tx}
		err := sr.RestoreFrom(ctx, fam, p)
		synctrace.Mark(ctx, "commit")
		return p, err
	}
	data, err := tx.payload()
	synctrace.Mark(ctx, "render")
	if err == nil {
		err = r.Restore(ctx, fam, data)
	}
	synctrace.Mark(ctx, "commit")
	return runner.PayloadBytes(data), err
}

// streamedPayload is a transaction as the io.WriterTo a
// runner.StreamRestorer reads: it writes the pieces the transaction
// yields as they come, and the same bytes at every call.
type streamedPayload struct{ tx *transaction }

func (p streamedPayload) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for piece, err := range p.tx.pieces() {
		if err != nil {
			return n, err
		}
		m, err := io.WriteString(w, piece)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// commitWithoutDeletes retries a transaction that failed only on chain
// deletions (iptables blamed nothing but "-X" lines, as both iptables-nft
// and iptables-legacy do for a chain still referenced) without them, and
// reports whether that committed.
//
// A stale chain someone else still references (an operator's debugging
// rule jumping to a KUBE-SEP chain, another tool hooking a KUBE-SVC chain)
// cannot be deleted: iptables rejects the -X and with it the whole table
// section, so the service's new rules would never be applied, and every
// retry, a full sync, would fail the same way. Deleting stale chains is
// housekeeping: the rules written do not jump to them. So the writes are
// committed alone; the chains stay recorded as installed, and every later
// full sync tries to delete them again. The failed restore was already
// counted and logged with its offending lines.
func (f *familySync) commitWithoutDeletes(ctx context.Context, r runner.Interface, tx *transaction, payload io.WriterTo, err error) bool {
	if len(tx.deletes) == 0 || !blamesOnlyDeletes(payload, err) {
		return false
	}
	writes := &transaction{writes: tx.writes, byName: tx.byName, rerender: tx.rerender}
	if len(writes.writes) > 0 {
		data, err := writes.payload()
		if err != nil || r.Restore(ctx, f.fam, data) != nil {
			return false
		}
	}
	f.installed.record(writes)
	klog.ErrorS(nil, "Stale iptables chains could not be deleted (still referenced by rules switchyard did not write?); "+
		"the new rules are in force and the next full sync retries the deletion",
		"family", f.fam, "chains", chainNames(tx.deletes))
	return true
}

func chainNames(keys []chainKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k.table) + "/" + k.name
	}
	return out
}

// blamesOnlyDeletes reports whether err blames some payload lines and all
// of them are chain deletions.
func blamesOnlyDeletes(payload io.WriterTo, err error) bool {
	var re *runner.RestoreError
	if !errors.As(err, &re) || len(re.Lines) == 0 {
		return false
	}
	lines := runner.PayloadLines(payload, re.Lines)
	for _, n := range re.Lines {
		if !strings.HasPrefix(lines[n], "-X ") {
			return false
		}
	}
	return true
}

// ensureJumps checks and adds each jump from a built-in chain, one
// iptables call at a time.
func ensureJumps(r runner.Interface, fam runner.Family, jumps []jumpRule) error {
	for _, j := range jumps {
		if _, err := r.EnsureChain(fam, string(j.table), j.to); err != nil {
			return fmt.Errorf("iptables backend: %s: ensure chain %s/%s: %w", fam, j.table, j.to, err)
		}
		if _, err := r.EnsureRule(fam, runner.Prepend, string(j.table), j.from, j.args...); err != nil {
			return fmt.Errorf("iptables backend: %s: ensure jump %s/%s -> %s: %w", fam, j.table, j.from, j.to, err)
		}
	}
	return nil
}

// cleanup removes the family's jumps from the built-in chains, the other
// jumps to our chains (cleanup_jumps.go), every chain of ours listed by
// iptables-save, and the counter sets. Nothing of ours is left after it:
// the next sync starts from scratch.
func (f *familySync) cleanup(ctx context.Context, b *Backend) error {
	r := b.runner
	f.prev = nil
	var errs []error
	for _, j := range jumpRules(false, true, f.fam == runner.IPv4) {
		if err := r.DeleteRule(f.fam, string(j.table), j.from, j.args...); err != nil {
			errs = append(errs, fmt.Errorf("iptables cleanup: %s: delete jump %s/%s -> %s: %w", f.fam, j.table, j.from, j.to, err))
		}
	}
	deletes, stray, err := f.listOwned(ctx, r)
	errs = append(errs, err)
	if data := jumpDeletePayload(stray); len(data) > 0 {
		if err := r.Restore(ctx, f.fam, data); err != nil {
			errs = append(errs, fmt.Errorf("iptables cleanup: %s: delete jumps: %w", f.fam, err))
		}
	}
	errs = append(errs, f.deleteChains(ctx, r, deletes, b.chunkRules))
	if errors.Join(errs...) == nil {
		errs = append(errs, destroyCounterSets(ctx, b.counterSets, f.fc.family))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	f.installed, f.listed = newInstalledChains(), true
	return nil
}

// listOwned saves each table and lists the chains of ours in it and the
// rules of other chains that jump to them.
func (f *familySync) listOwned(ctx context.Context, r runner.Interface) ([]chainKey, map[table][]string, error) {
	var deletes []chainKey
	var errs []error
	stray := map[table][]string{}
	for _, t := range allTables() {
		data, err := r.SaveTable(ctx, f.fam, string(t))
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables cleanup: %s: list %s: %w", f.fam, t, err))
			continue
		}
		for _, name := range runner.SavedChains(data) {
			if isOwnedChain(t, name) {
				deletes = append(deletes, chainKey{table: t, name: name})
			}
		}
		stray[t] = strayJumps(t, data)
	}
	return deletes, stray, errors.Join(errs...)
}

// deleteChains deletes the chains in bounded transactions, referrers
// first, stopping at the first failure.
func (f *familySync) deleteChains(ctx context.Context, r runner.Interface, deletes []chainKey, bound int) error {
	for i, tx := range planTransactions(nil, deletes, bound) {
		data, err := tx.payload()
		if err == nil {
			err = r.Restore(ctx, f.fam, data)
		}
		if err != nil {
			klog.ErrorS(err, "iptables-restore failed during cleanup", "family", f.fam, "lines", runner.OffendingLines(data, err))
			return fmt.Errorf("iptables cleanup: %s: restore %d: %w", f.fam, i+1, err)
		}
		f.installed.record(tx)
	}
	return nil
}
