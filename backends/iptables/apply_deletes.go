package iptables

import (
	"context"
	"errors"
	"io"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

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
func (f *familySync) commitWithoutDeletes(ctx context.Context, b *Backend, tx *transaction, payload io.WriterTo, err error) bool {
	if len(tx.deletes) == 0 || !blamesOnlyDeletes(payload, err) {
		return false
	}
	writes := &transaction{writes: tx.writes, byName: tx.byName, rerender: tx.rerender}
	if len(writes.writes) > 0 {
		if err := b.runner.Restore(ctx, f.fam, writes.payload()); err != nil {
			return false
		}
	}
	f.record(writes)
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
