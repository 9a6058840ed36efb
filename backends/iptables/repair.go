package iptables

import (
	"fmt"
	"maps"
	"slices"

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

// planRepair returns the repair of the changed chains, given the ruleset
// last applied (prev), or why a full sync is needed instead. The caller
// marks the chains as not known, so the partial sync writes them.
func planRepair(prev *Ruleset, damaged []chainKey) (*repairPlan, string) {
	if prev == nil {
		return nil, "chains changed before any sync succeeded"
	}
	owners := map[chainKey]proxier.ServicePortName{}
	if slices.ContainsFunc(damaged, func(k chainKey) bool { return isServiceChain(k.name) }) {
		for n, s := range prev.services {
			for _, k := range s.chainKeys() {
				owners[k] = n
			}
		}
	}
	p := &repairPlan{ports: map[proxier.ServicePortName]struct{}{}}
	for _, k := range damaged {
		if n, ok := owners[k]; ok {
			p.ports[n] = struct{}{}
		} else if prev.topLevel(k) != nil {
			p.chains = append(p.chains, k)
		} else {
			return nil, fmt.Sprintf("chain %s/%s changed", k.table, k.name)
		}
	}
	if len(p.ports) > maxRepairPorts {
		return nil, fmt.Sprintf("the chains of %d service ports changed", len(p.ports))
	}
	return p, ""
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
