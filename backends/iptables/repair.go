package iptables

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// maxRepairPorts bounds the service ports a verification repairs with a
// partial sync; more changed chains than that means a table was wiped,
// and the full sync is the right repair.
const maxRepairPorts = 256

// repairPlan is what a partial sync rewrites besides its Diff after a
// verification found chains changed behind switchyard's back: the service
// ports owning changed per-service chains (re-rendered whole, writing the
// chains not known to be intact) and the changed top-level or base
// chains (written from the ruleset). The jumps to a per-service chain
// live in the chains of the same port or in the top-level chains, so
// both kinds are covered; transactions stay bottom-up, so a deleted
// KUBE-SEP chain exists again before its KUBE-SVC chain jumps to it.
type repairPlan struct {
	ports  map[proxier.ServicePortName]struct{}
	chains []chainKey
}

// verifyByCounts verifies the family by rule counts when the runner can
// read them without iptables-save (verify_counts.go), and plans the
// repair of the chains found changed. counted is false when the runner
// cannot: the listing verification then runs.
func (f *familySync) verifyByCounts(ctx context.Context, b *Backend) (reason string, counted bool) {
	mode := b.runner.Mode()
	ur, nft := b.runner.(runner.ChainUseReader)
	rc, legacy := b.runner.(runner.RuleCounter)
	nft, legacy = nft && mode == runner.ModeNFT, legacy && mode == runner.ModeLegacy
	if !nft && !legacy {
		return "", false
	}
	f.verifiedAt = b.verify.clock.Now()
	var damaged []chainKey
	var err error
	if legacy {
		reason, damaged, err = f.verifyCountsReason(ctx, rc)
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
	jumps := jumpRules(f.fc.localhostNodePorts, f.fam == runner.IPv4)
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

// planRepair returns the repair of the changed chains, or why a full sync
// is needed instead. It marks the chains as not known, so the partial
// sync writes them.
func (f *familySync) planRepair(damaged []chainKey) (*repairPlan, string) {
	if f.prev == nil {
		return nil, "chains changed before any sync succeeded"
	}
	owners := map[chainKey]proxier.ServicePortName{}
	if slices.ContainsFunc(damaged, func(k chainKey) bool { return isServiceChain(k.name) }) {
		for n, s := range f.prev.services {
			for _, c := range s.chains {
				owners[c.key] = n
			}
		}
	}
	p := &repairPlan{ports: map[proxier.ServicePortName]struct{}{}}
	for _, k := range damaged {
		if n, ok := owners[k]; ok {
			p.ports[n] = struct{}{}
		} else if f.prev.topLevel(k) != nil {
			p.chains = append(p.chains, k)
		} else {
			return nil, fmt.Sprintf("chain %s/%s changed", k.table, k.name)
		}
	}
	if len(p.ports) > maxRepairPorts {
		return nil, fmt.Sprintf("the chains of %d service ports changed", len(p.ports))
	}
	for _, k := range damaged {
		c := f.installed[k]
		c.known = false
		f.installed[k] = c
	}
	return p, ""
}

// topLevel returns the ruleset's base or dispatch chain k, or nil.
func (rs *Ruleset) topLevel(k chainKey) *chainRules {
	for _, c := range slices.Concat(rs.base, rs.dispatch) {
		if c.key == k {
			return c
		}
	}
	return nil
}

// widen adds the ports to repair to diff; a nil plan returns diff.
func (p *repairPlan) widen(diff *proxier.Diff) *proxier.Diff {
	if p == nil || len(p.ports) == 0 {
		return diff
	}
	d := *diff
	d.Changed = maps.Clone(diff.Changed)
	if d.Changed == nil {
		d.Changed = map[proxier.ServicePortName]struct{}{}
	}
	maps.Copy(d.Changed, p.ports)
	return &d
}

// addChains adds the top-level chains to repair to a partial sync's
// writes, unless already there.
func (p *repairPlan) addChains(rs *Ruleset, writes []*chainRules) []*chainRules {
	if p == nil {
		return writes
	}
	for _, k := range p.chains {
		if c := rs.topLevel(k); c != nil && !slices.ContainsFunc(writes, func(w *chainRules) bool { return w.key == k }) {
			writes = append(writes, c)
		}
	}
	return writes
}
