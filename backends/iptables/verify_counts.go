package iptables

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// Once the fingerprint shows another writer, verification compares every
// chain switchyard wrote with the kernel without iptables-save, which
// costs seconds at 10k services:
//
//   - iptables-legacy: one IPT_SO_GET_ENTRIES read per table
//     (runner.RuleCounter) gives every chain's rule count and the jumps
//     of the built-in chains, canaries included (0.5-0.8 s for nat at 10k
//     services x 10 endpoints; iptables-legacy-save of nat 1-2.5 s).
//   - iptables-nft: counting every chain's rules takes one netlink dump
//     per chain (3-5 s there), so verification dumps only the chains
//     (runner.ChainUseReader, ~0.2 s): each one's nf_tables use count is
//     its rules plus the jumps to it. Each installed chain remembers the
//     jumps to it (inbound), learnt when its rule count was known right:
//     after a full sync nobody else interleaved with, or in a
//     verification that found the table intact. A chain whose use is not
//     rules + inbound is a suspect, and only the suspects' rules are
//     counted. A flushed KUBE-SVC chain loses its rules (and its KUBE-SEP
//     chains a jump each): it and its endpoint chains become suspects and
//     the count singles it out. A rewrite of ours can leave a learnt
//     inbound stale; that costs a count, and the hourly full sync covers
//     the rare damage that would exactly offset it.
//
// The chains found changed are repaired by the same sync (repair.go).

// maxSuspects bounds the chains whose rules an nft verification counts
// although they had a known inbound count (~25 us each): more than that
// means a table was flushed wholesale, which a full sync repairs anyway.
// A flushed KUBE-SERVICES makes every KUBE-SVC chain a suspect (it lost a
// jump): 10k services stay under the bound and get a partial repair.
const maxSuspects = 16384

// verifyByCounts verifies the family by rule counts when the runner can
// read them without iptables-save, and plans the repair of the chains
// found changed. counted is false when the runner cannot: the listing
// verification (verify.go) then runs.
func (f *familySync) verifyByCounts(ctx context.Context, b *Backend) (reason string, counted bool) {
	mode := b.runner.Mode()
	ur, nft := b.runner.(runner.ChainUseReader)
	rc, legacy := b.runner.(runner.RuleCounter)
	nft, legacy = nft && mode == runner.ModeNFT, legacy && mode == runner.ModeLegacy
	if !nft && !legacy {
		return "", false
	}
	f.verifiedAt = b.verify.Now()
	var damaged []chainKey
	var err error
	if legacy {
		reason, damaged, err = f.verifyLegacy(ctx, rc)
	} else {
		reason, damaged, err = f.verifyNFT(ctx, ur)
	}
	if err != nil {
		klog.V(2).InfoS("Cannot verify iptables chains; will retry", "family", f.fam, "err", err)
		return "", true
	}
	if reason == "" && len(damaged) > 0 {
		if f.repair, reason = f.planRepair(damaged); f.repair != nil {
			klog.InfoS("iptables chains were changed outside switchyard; rewriting them", "family", f.fam,
				"chains", len(damaged), "first", string(damaged[0].table)+"/"+damaged[0].name)
			return "", true
		}
	}
	if reason != "" {
		klog.InfoS("iptables rules were changed outside switchyard; doing a full sync", "family", f.fam, "found", reason)
		return "rules changed outside switchyard: " + reason, true
	}
	return "", true
}

// verifyNFT checks the family on iptables-nft with netlink reads only:
// one dump of the family's chains holds the canaries and every chain's
// use count, the built-in chains' rules give the jumps.
func (f *familySync) verifyNFT(ctx context.Context, ur runner.ChainUseReader) (string, []chainKey, error) {
	all, err := ur.ChainUses(ctx, f.fam)
	if err != nil {
		return "", nil, err
	}
	uses := map[table]map[string]int{}
	for _, t := range allTables() {
		if _, ok := all[string(t)][chainCanary]; !ok {
			return "canary chain " + string(t) + "/" + chainCanary + " gone", nil, nil
		}
		uses[t] = all[string(t)]
	}
	if reason, err := f.verifyNFTJumps(ctx, ur); reason != "" || err != nil {
		return reason, nil, err
	}
	return f.verifyUses(ctx, ur, uses)
}

// verifyNFTJumps checks that the built-in chains still jump to ours.
func (f *familySync) verifyNFTJumps(ctx context.Context, ur runner.ChainUseReader) (string, error) {
	jumps := jumpRules(f.fc.localhostNodePorts, f.fc.serviceTraffic, f.fam == runner.IPv4)
	from := map[table][]string{}
	for _, j := range jumps {
		if !slices.Contains(from[j.table], j.from) {
			from[j.table] = append(from[j.table], j.from)
		}
	}
	counts := map[table]*runner.TableCounts{}
	for t, chains := range from {
		c, err := ur.CountChainRules(ctx, f.fam, string(t), chains)
		if err != nil {
			return "", err
		}
		counts[t] = c
	}
	for _, j := range jumps {
		if !slices.Contains(counts[j.table].Jumps[j.from], j.to) {
			return fmt.Sprintf("the jump %s/%s -> %s is gone", j.table, j.from, j.to), nil
		}
	}
	return "", nil
}

// verifyLegacy checks the family with one read per table on
// legacy iptables: canaries, jumps from the built-in chains, and the rule
// count of every chain written. It returns why a full sync is needed, or
// the chains that changed.
func (f *familySync) verifyLegacy(ctx context.Context, rc runner.RuleCounter) (string, []chainKey, error) {
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
	for _, j := range jumpRules(f.fc.localhostNodePorts, f.fc.serviceTraffic, f.fam == runner.IPv4) {
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
	learnt := map[chainKey]int32{}
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
		damaged = append(damaged, confirmSuspects(f.installed, t, suspects, uses, counts, learnt)...)
	}
	if len(damaged) == 0 {
		// A damaged chain's missing rules also took jumps away from the
		// chains they pointed to: learn only from an intact table.
		for k, in := range learnt {
			c := f.installed[k]
			c.inbound, c.inboundKnown = in, true
			f.installed[k] = c
		}
	}
	slices.SortFunc(damaged, compareKeys)
	return "", damaged, nil
}

// confirmSuspects returns the suspects whose rule count differs from what
// was written, and notes in learnt the inbound jumps of the others.
func confirmSuspects(installed map[chainKey]installedChain, t table, suspects []string, uses map[string]int,
	counts *runner.TableCounts, learnt map[chainKey]int32) []chainKey {
	var damaged []chainKey
	for _, name := range suspects {
		k := chainKey{table: t, name: name}
		n, ok := counts.Rules[name]
		if !ok || n != installed[k].rules {
			damaged = append(damaged, k)
			continue
		}
		learnt[k] = int32(uses[name] - n)
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
	if !ok || b.runner.Mode() != runner.ModeNFT || !f.fp.stamp.Valid() {
		return
	}
	all, err := r.ChainUses(ctx, f.fam)
	if err != nil {
		return
	}
	if fp, ok := b.fingerprint(ctx, f.fam); !f.fp.stamp.Untouched(fp, ok) {
		return
	}
	for k, c := range f.installed {
		if u, ok := all[string(k.table)][k.name]; ok && c.known {
			c.inbound, c.inboundKnown = int32(u-c.rules), true
			f.installed[k] = c
		}
	}
}
