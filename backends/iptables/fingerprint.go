package iptables

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
)

// The periodic verification must notice a flushed KUBE-SVC chain, and
// reading every service chain costs time at 10k services (0.4-0.8 s of
// CPU with the counting of verify.go; an iptables-save of nat took ~3 s
// on nft). So each family keeps a fingerprint of the kernel's rules
// (runner.Fingerprinter: the nf_tables generation, or the legacy tables'
// entry counts and sizes) taken after switchyard's own writes. While it
// is unchanged nobody else wrote and verification reads nothing; once it
// changes, every chain switchyard owns is compared, service chains
// included.

// fingerprintState is one family's record.
type fingerprintState struct {
	// stamp is the fingerprint after our last successful sync, kept by
	// reconcile.Stamp's rule.
	stamp reconcile.Stamp
	// untouched is set, before a sync writes anything, when the kernel's
	// fingerprint still equals the stamp: nobody wrote since.
	untouched bool
	// compared is set when this sync compared every chain with what was
	// written (or rewrote them all): the kernel holds ours again.
	compared bool
}

// begin notes, before a sync writes, whether the kernel's fingerprint
// (now, read when ok) is still the stamp.
func (s *fingerprintState) begin(now uint64, ok bool) {
	s.untouched, s.compared = s.stamp.Untouched(now, ok), false
}

// known says whether the kernel holds what a successful sync wrote, by
// reconcile.Stamp's rule: nobody else wrote before it, or it compared or
// (full) rewrote every chain.
func (s *fingerprintState) known(full bool) bool {
	return s.untouched || s.compared || full
}

// readFingerprint reads the kernel's fingerprint of the family's rules,
// or false when the runner cannot.
func readFingerprint(ctx context.Context, r runner.Interface, fam runner.Family) (uint64, bool) {
	fr, ok := r.(runner.Fingerprinter)
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
