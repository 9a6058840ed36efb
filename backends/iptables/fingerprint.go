package iptables

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
)

// The periodic verification must notice a flushed KUBE-SVC chain, and
// reading every service chain costs time at 10k services (0.4-0.8 s of
// CPU with the counting of verify_counts.go; an iptables-save of nat
// took ~3 s on nft). So each family keeps a fingerprint of the kernel's
// rules (runner.Fingerprinter: the nf_tables generation, or the legacy
// tables' entry counts and sizes) taken after switchyard's own writes.
// While it is unchanged nobody else wrote and verification reads
// nothing; once it changes, every chain switchyard owns is compared,
// service chains included.

// fingerprintState is one family's record.
type fingerprintState struct {
	// stamp is the fingerprint after our last successful sync, kept by
	// reconcile.Stamp's rule.
	stamp reconcile.Stamp
	// untouched is set, before a sync writes anything, when the kernel's
	// fingerprint still equals value: nobody wrote since.
	untouched bool
	// compared is set when this sync compared every chain with what was
	// written (or rewrote them all): the kernel holds ours again.
	compared bool
}

// checkFingerprints marks, before any family writes, the families whose
// rules nobody else touched since the last sync (with iptables-nft the
// generation is shared by both families, so it must be read before
// either writes).
func (b *Backend) checkFingerprints(ctx context.Context) {
	for _, f := range b.families {
		fp, ok := b.fingerprint(ctx, f.fam)
		f.fp.untouched = f.fp.stamp.Untouched(fp, ok)
		f.fp.compared = false
	}
}

// recordFingerprints notes the kernel's fingerprints after a successful
// sync of every family (full tells which rewrote everything), by
// reconcile.Stamp's rule: known when nobody else wrote, or this sync
// compared or rewrote every chain.
func (b *Backend) recordFingerprints(ctx context.Context, full []bool) {
	for i, f := range b.families {
		known := f.fp.untouched || f.fp.compared || full[i]
		var fp uint64
		ok := false
		if known {
			fp, ok = b.fingerprint(ctx, f.fam)
		}
		f.fp.stamp.Record(fp, ok, known)
	}
}

func (b *Backend) fingerprint(ctx context.Context, fam runner.Family) (uint64, bool) {
	fr, ok := b.runner.(runner.Fingerprinter)
	if !ok {
		return 0, false
	}
	fp, err := fr.Fingerprint(ctx, fam)
	if err != nil {
		klog.V(2).InfoS("Cannot read the iptables fingerprint; verifying by listing", "family", fam, "err", err)
		return 0, false
	}
	return fp, true
}

// verifyServiceChains compares the rule count of every service chain
// switchyard wrote with one save of the nat table (runners that cannot
// count rules): a chain flushed or deleted behind its back, while the
// KUBE-SERVICES rule jumping to it stays, breaks that one service and
// nothing else shows it.
func (f *familySync) verifyServiceChains(ctx context.Context, l runner.ChainLister, saved *savedTables) (string, error) {
	if saved == nil {
		return "", nil
	}
	data, err := saved.table(ctx, f.fam, string(tableNAT))
	if err != nil {
		return "", err
	}
	counts := ruleCounts(data)
	for k, c := range f.installed {
		if k.table != tableNAT || !c.known || !isServiceChain(k.name) {
			continue
		}
		n, exists := counts[k.name]
		switch {
		case !exists:
			return fmt.Sprintf("chain nat/%s is gone", k.name), nil
		case n != c.rules:
			return fmt.Sprintf("chain nat/%s holds %d rules, %d were written", k.name, n, c.rules), nil
		}
	}
	return "", nil
}

// ruleCounts maps each chain declared in an iptables-save dump to its
// number of rules.
func ruleCounts(data []byte) map[string]int {
	counts := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			counts[name] += 0
		case strings.HasPrefix(line, "-A "):
			name, _, _ := strings.Cut(line[3:], " ")
			counts[name]++
		}
	}
	return counts
}
