package iptables

import (
	"context"
	"fmt"
	"slices"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
)

// Once the fingerprint (fingerprint.go) shows another writer, a sync that
// verifies (sync.go decides when) compares every chain switchyard wrote
// with the kernel without iptables-save, which costs seconds at 10k
// services:
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
// Runners that cannot count rules are checked by listing (verify_list.go).

// maxSuspects bounds the chains whose rules an nft verification counts
// although they had a known inbound count (~25 us each): more than that
// means a table was flushed wholesale, which a full sync repairs anyway.
// A flushed KUBE-SERVICES makes every KUBE-SVC chain a suspect (it lost a
// jump): 10k services stay under the bound and get a partial repair.
const maxSuspects = 16384

// countCheck compares one family's chains with the kernel by rule
// counts read without iptables-save. It reports why a full sync is
// needed, or the chains that changed; the sync decides what to do of it.
type countCheck struct {
	fam       runner.Family
	jumps     []jumpRule
	installed *installedChains
	nft       runner.ChainUseReader // on iptables-nft
	legacy    runner.RuleCounter    // on legacy iptables
}

// newCountCheck returns the check, or false when the runner cannot count
// rules (the listing check, verify_list.go, runs instead).
func newCountCheck(r runner.Interface, fam runner.Family, jumps []jumpRule, installed *installedChains) (*countCheck, bool) {
	c := &countCheck{fam: fam, jumps: jumps, installed: installed}
	if ur, ok := r.(runner.ChainUseReader); ok && r.Mode() == runner.ModeNFT {
		c.nft = ur
	} else if rc, ok := r.(runner.RuleCounter); ok && r.Mode() == runner.ModeLegacy {
		c.legacy = rc
	}
	return c, c.nft != nil || c.legacy != nil
}

// run checks the family: a reason for a full sync, or the chains found
// changed.
func (c *countCheck) run(ctx context.Context) (string, []chainKey, error) {
	if c.legacy != nil {
		return c.legacyCounts(ctx)
	}
	return c.nftUses(ctx)
}

// nftUses checks the family on iptables-nft with netlink reads only: one
// dump of the family's chains holds the canaries and every chain's use
// count, the built-in chains' rules give the jumps.
func (c *countCheck) nftUses(ctx context.Context) (string, []chainKey, error) {
	all, err := c.nft.ChainUses(ctx, c.fam)
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
	if reason, err := c.nftJumps(ctx); reason != "" || err != nil {
		return reason, nil, err
	}
	return c.changedByUses(ctx, uses)
}

// nftJumps checks that the built-in chains still jump to ours.
func (c *countCheck) nftJumps(ctx context.Context) (string, error) {
	from := map[table][]string{}
	for _, j := range c.jumps {
		if !slices.Contains(from[j.table], j.from) {
			from[j.table] = append(from[j.table], j.from)
		}
	}
	counts := map[table]*runner.TableCounts{}
	for t, chains := range from {
		tc, err := c.nft.CountChainRules(ctx, c.fam, string(t), chains)
		if err != nil {
			return "", err
		}
		counts[t] = tc
	}
	return missingJump(c.jumps, counts), nil
}

// missingJump names the first jump from a built-in chain the counts do
// not show, or "".
func missingJump(jumps []jumpRule, counts map[table]*runner.TableCounts) string {
	for _, j := range jumps {
		if !slices.Contains(counts[j.table].Jumps[j.from], j.to) {
			return fmt.Sprintf("the jump %s/%s -> %s is gone", j.table, j.from, j.to)
		}
	}
	return ""
}

// legacyCounts checks the family with one read per table on legacy
// iptables: canaries, jumps from the built-in chains, and the rule count
// of every chain written.
func (c *countCheck) legacyCounts(ctx context.Context) (string, []chainKey, error) {
	counts := map[table]*runner.TableCounts{}
	for _, t := range allTables() {
		tc, err := c.legacy.CountRules(ctx, c.fam, string(t))
		if err != nil {
			return "", nil, err
		}
		if !tc.Exists(chainCanary) {
			return "canary chain " + string(t) + "/" + chainCanary + " gone", nil, nil
		}
		counts[t] = tc
	}
	if reason := missingJump(c.jumps, counts); reason != "" {
		return reason, nil, nil
	}
	var damaged []chainKey
	for k, in := range c.installed.chains {
		if !verifiedByCount(k, in) {
			continue
		}
		if n, ok := counts[k.table].Rules[k.name]; !ok || n != in.rules {
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

// changedByUses finds, on iptables-nft, the nat and filter chains that
// changed from their chains' use counts, then a rule count of the
// suspects. It returns a reason for a full sync instead when a table
// changed wholesale. From an intact table it learns the jumps to the
// suspects.
func (c *countCheck) changedByUses(ctx context.Context, tableUses map[table]map[string]int) (string, []chainKey, error) {
	var damaged []chainKey
	learnt := map[chainKey]int32{}
	for _, t := range []table{tableNAT, tableFilter} {
		uses := tableUses[t]
		gone, suspects, strong := c.suspects(t, uses)
		damaged = append(damaged, gone...)
		if strong > maxSuspects {
			return fmt.Sprintf("%d chains of %s changed", strong, t), nil, nil
		}
		if len(suspects) == 0 {
			continue
		}
		counts, err := c.nft.CountChainRules(ctx, c.fam, string(t), suspects)
		if err != nil {
			return "", nil, err
		}
		damaged = append(damaged, confirmSuspects(c.installed.chains, t, suspects, uses, counts, learnt)...)
	}
	if len(damaged) == 0 {
		// A damaged chain's missing rules also took jumps away from the
		// chains they pointed to: learn only from an intact table.
		c.installed.learnInbound(learnt)
	}
	slices.SortFunc(damaged, compareKeys)
	return "", damaged, nil
}

// suspects sorts the table's verified chains by their use count: gone,
// suspect (sorted; strong counts those whose use contradicts a known
// inbound count), or intact.
func (c *countCheck) suspects(t table, uses map[string]int) (gone []chainKey, suspects []string, strong int) {
	for k, in := range c.installed.chains {
		if k.table != t || !verifiedByCount(k, in) {
			continue
		}
		u, ok := uses[k.name]
		switch {
		case !ok:
			gone = append(gone, k)
		case !in.inboundKnown:
			suspects = append(suspects, k.name)
		case u != in.rules+int(in.inbound):
			suspects = append(suspects, k.name)
			strong++
		}
	}
	slices.Sort(suspects)
	return gone, suspects, strong
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

// learnUses records, right after a full sync on iptables-nft, the inbound
// jumps of every chain written (use count minus rules), so that the next
// verification counts no rules. It learns nothing unless the stamp shows
// nobody else wrote since the sync: a chain damaged meanwhile would be
// learnt as intact.
func learnUses(ctx context.Context, r runner.Interface, fam runner.Family, stamp reconcile.Stamp, installed *installedChains) {
	ur, ok := r.(runner.ChainUseReader)
	if !ok || r.Mode() != runner.ModeNFT || !stamp.Valid() {
		return
	}
	all, err := ur.ChainUses(ctx, fam)
	if err != nil {
		return
	}
	if fp, ok := readFingerprint(ctx, r, fam); !stamp.Untouched(fp, ok) {
		return
	}
	installed.learnUses(all)
}
