package iptables

import (
	"context"
	"fmt"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/iptables/runner"
)

// Once the fingerprint shows another writer, verification compares every
// chain switchyard wrote with the kernel without iptables-save, which
// costs seconds at 10k services:
//
//   - iptables-legacy: one IPT_SO_GET_ENTRIES read per table
//     (runner.RuleCounter) gives every chain's rule count and the jumps
//     of the built-in chains, canaries included (~0.5 s of CPU for nat
//     at 10k services x 10 endpoints, against ~6 s for the saves).
//   - iptables-nft: counting every chain's rules takes one netlink dump
//     per chain (~3 s there), so verification dumps only the chains
//     (runner.ChainUseReader, ~150 ms): each one's nf_tables use count is
//     its rules plus the jumps to it. Each installed chain remembers the
//     jumps to it (inbound) learnt when its count was last known right;
//     a chain whose use is not rules + inbound is a suspect, and only the
//     suspects' rules are counted. A flushed KUBE-SVC chain loses its
//     rules (and its KUBE-SEP chains a jump each): it and its endpoint
//     chains become suspects and the count singles it out. A rewrite of
//     ours can leave a learnt inbound stale; that costs a count, and the
//     hourly full sync covers the rare damage that would offset it.
//
// The chains found changed are repaired by the same sync (repair.go).

// maxSuspects bounds the chains whose rules an nft verification counts
// although they had a known inbound count (~25 us each): more than that
// means a table was flushed wholesale, which a full sync repairs anyway.
// A flushed KUBE-SERVICES makes every KUBE-SVC chain a suspect (it lost a
// jump): 10k services stay under the bound and get a partial repair.
const maxSuspects = 16384

// verifyCountsReason checks the family with one read per table on
// legacy iptables: canaries, jumps from the built-in chains, and the rule
// count of every chain written. It returns why a full sync is needed, or
// the chains that changed.
func (f *familySync) verifyCountsReason(ctx context.Context, rc runner.RuleCounter) (string, []chainKey, error) {
	counts := map[table]*runner.TableCounts{}
	for _, t := range allTables() {
		c, err := rc.CountRules(ctx, f.fam, string(t))
		if err != nil {
			return "", nil, err
		}
		if !c.Exists(chainCanary) {
			return "canary chain " + string(t) + "/" + chainCanary + " gone", nil, nil
		}
		counts[t] = c
	}
	for _, j := range jumpRules(f.fc.localhostNodePorts, f.fam == runner.IPv4) {
		if !slices.Contains(counts[j.table].Jumps[j.from], j.to) {
			return fmt.Sprintf("the jump %s/%s -> %s is gone", j.table, j.from, j.to), nil, nil
		}
	}
	var damaged []chainKey
	for k, c := range f.installed {
		if !verifiedByCount(k, c) {
			continue
		}
		if n, ok := counts[k.table].Rules[k.name]; !ok || n != c.rules {
			damaged = append(damaged, k)
		}
	}
	slices.SortFunc(damaged, compareKeys)
	return "", damaged, nil
}

// verifiedByCount says whether verification compares a chain's rule
// count: every chain written in a known state but kubelet's
// KUBE-FIREWALL, to which kubelet may add.
func verifiedByCount(k chainKey, c installedChain) bool {
	return c.known && k.name != chainKubeletFirewall
}

// verifyUses finds, on iptables-nft, the nat and filter chains that
// changed from their chains' use counts, then a rule count of the
// suspects. It returns a reason for a full sync instead when a table
// changed wholesale.
func (f *familySync) verifyUses(ctx context.Context, r runner.ChainUseReader, tableUses map[table]map[string]int) (string, []chainKey, error) {
	var damaged []chainKey
	for _, t := range []table{tableNAT, tableFilter} {
		uses := tableUses[t]
		var suspects []string
		strong := 0
		for k, c := range f.installed {
			if k.table != t || !verifiedByCount(k, c) {
				continue
			}
			u, ok := uses[k.name]
			switch {
			case !ok:
				damaged = append(damaged, k)
			case !c.inboundKnown:
				suspects = append(suspects, k.name)
			case u != c.rules+int(c.inbound):
				suspects = append(suspects, k.name)
				strong++
			}
		}
		if strong > maxSuspects {
			return fmt.Sprintf("%d chains of %s changed", strong, t), nil, nil
		}
		if len(suspects) == 0 {
			continue
		}
		slices.Sort(suspects)
		counts, err := r.CountChainRules(ctx, f.fam, string(t), suspects)
		if err != nil {
			return "", nil, err
		}
		damaged = append(damaged, f.confirmSuspects(t, suspects, uses, counts)...)
	}
	slices.SortFunc(damaged, compareKeys)
	return "", damaged, nil
}

// confirmSuspects returns the suspects whose rule count differs from what
// was written, and learns the inbound jumps of the others.
func (f *familySync) confirmSuspects(t table, suspects []string, uses map[string]int, counts *runner.TableCounts) []chainKey {
	var damaged []chainKey
	for _, name := range suspects {
		k := chainKey{table: t, name: name}
		c := f.installed[k]
		n, ok := counts.Rules[name]
		if !ok || n != c.rules {
			damaged = append(damaged, k)
			continue
		}
		c.inbound, c.inboundKnown = int32(uses[name]-n), true
		f.installed[k] = c
	}
	return damaged
}

// learnUses records, right after a full sync, the inbound jumps of every
// chain written (use count minus rules), so that the next verification
// counts no rules. It learns nothing if the fingerprint shows another
// writer since the sync: a chain damaged meanwhile would be learnt as
// intact.
func (b *Backend) learnUses(ctx context.Context, f *familySync) {
	r, ok := b.runner.(runner.ChainUseReader)
	if !ok || b.runner.Mode() != runner.ModeNFT || !f.fp.valid {
		return
	}
	all, err := r.ChainUses(ctx, f.fam)
	if err != nil {
		return
	}
	if fp, ok := b.fingerprint(ctx, f.fam); !ok || fp != f.fp.value {
		return
	}
	for k, c := range f.installed {
		if u, ok := all[string(k.table)][k.name]; ok && c.known {
			c.inbound, c.inboundKnown = int32(u-c.rules), true
			f.installed[k] = c
		}
	}
}
