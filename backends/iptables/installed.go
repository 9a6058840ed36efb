package iptables

import (
	"maps"
	"slices"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/shrink"
)

// installedChain is what this mode believes one of its chains holds in the
// kernel: a fingerprint of the rules it last wrote there (known is false
// when a failed restore may or may not have applied them) and how many.
// With iptables-nft, inbound is the number of jumps to it last seen in
// the kernel, when inboundKnown (see verify.go).
type installedChain struct {
	hash         uint64
	rules        int
	inbound      int32
	known        bool
	inboundKnown bool
}

// installedChains is one family's record of every chain of ours believed
// to exist in the kernel. It is what lets a partial sync send only the
// chains that changed without reading the kernel's rules (iptables-save
// costs seconds on big tables), and what verification compares the
// kernel with.
type installedChains struct {
	chains map[chainKey]installedChain
	peak   shrink.Peak
	// rules counts the rules of chains, per table.
	rules map[table]int
}

func newInstalledChains() *installedChains {
	return &installedChains{chains: map[chainKey]installedChain{}, rules: map[table]int{}}
}

// differs reports whether a chain must be written: it is not known to be
// installed with exactly these rules.
func (in *installedChains) differs(c *chainRules) bool {
	got, ok := in.chains[c.key]
	return !ok || !got.known || got.rules != c.ruleCount() || got.hash != c.hash()
}

// record notes a committed transaction.
func (in *installedChains) record(tx *transaction) {
	for _, c := range tx.writes {
		in.set(c.key, installedChain{hash: c.hash(), known: true, rules: c.ruleCount()})
	}
	for _, k := range tx.deletes {
		in.set(k, installedChain{})
		delete(in.chains, k)
	}
}

// recordUncertain notes a failed transaction. A table committed before
// the failing one may have applied: its written chains may exist with
// unknown content, its deleted chains may still exist. The next sync is
// full (sync.go) and settles both.
func (in *installedChains) recordUncertain(tx *transaction) {
	for _, c := range tx.writes {
		in.set(c.key, installedChain{rules: c.ruleCount()})
	}
}

// set records what a chain now holds. The jumps to a rewritten chain
// come from other chains: their learnt count stays.
func (in *installedChains) set(k chainKey, c installedChain) {
	old := in.chains[k]
	in.rules[k.table] += c.rules - old.rules
	c.inbound, c.inboundKnown = old.inbound, old.inboundKnown
	in.chains[k] = c
}

// forget marks chains as not known, so the next sync writes them.
func (in *installedChains) forget(keys []chainKey) {
	for _, k := range keys {
		c := in.chains[k]
		c.known = false
		in.chains[k] = c
	}
}

// learnInbound records the jumps to chains counted in the kernel.
func (in *installedChains) learnInbound(inbound map[chainKey]int32) {
	for k, n := range inbound {
		c := in.chains[k]
		c.inbound, c.inboundKnown = n, true
		in.chains[k] = c
	}
}

// learnUses records, for every known chain, the jumps to it: its use
// count in the kernel (per table and chain: its rules plus the jumps to
// it) less its rules. Only right when the rule counts are.
func (in *installedChains) learnUses(uses map[string]map[string]int) {
	for k, c := range in.chains {
		if u, ok := uses[string(k.table)][k.name]; ok && c.known {
			c.inbound, c.inboundKnown = int32(u-c.rules), true
			in.chains[k] = c
		}
	}
}

// noteLeftovers records the service chains an iptables-save of nat shows
// (left by an earlier run of switchyard or kube-proxy), so the first full
// sync deletes those it does not write.
func (in *installedChains) noteLeftovers(natSave []byte) {
	for _, name := range runner.SavedChains(natSave) {
		k := chainKey{table: tableNAT, name: name}
		if _, ok := in.chains[k]; !ok && isServiceChain(name) {
			in.chains[k] = installedChain{}
		}
	}
}

// stale lists the installed service chains not among chains (none on a
// first sync into empty tables, which then builds no set).
func (in *installedChains) stale(chains []*chainRules) []chainKey {
	var out []chainKey
	for k := range in.chains {
		if isServiceChain(k.name) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	want := make(map[chainKey]bool, len(chains))
	for _, c := range chains {
		want[c.key] = true
	}
	out = slices.DeleteFunc(out, func(k chainKey) bool { return want[k] })
	slices.SortFunc(out, compareKeys)
	return out
}

// reserve sizes the record for n chains before a full sync fills it:
// grown insert by insert, the map of a first sync at 10k services x 10
// endpoints (~130k chains) allocates about twice its final size on the
// way.
func (in *installedChains) reserve(n int) {
	if len(in.chains) >= n/2 {
		return
	}
	m := make(map[chainKey]installedChain, n)
	maps.Copy(m, in.chains)
	in.chains = m
}

// shrink gives back the space of deleted entries after mass deletions
// (Go maps never shrink).
func (in *installedChains) shrink() {
	in.chains = shrink.Map(in.chains, &in.peak)
}

func compareKeys(a, b chainKey) int {
	if a.table != b.table {
		if a.table < b.table {
			return -1
		}
		return 1
	}
	if a.name < b.name {
		return -1
	} else if a.name > b.name {
		return 1
	}
	return 0
}
