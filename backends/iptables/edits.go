package iptables

import (
	"strconv"
	"strings"
)

// maxEditShare bounds the edits a top-level chain takes instead of a
// rewrite: at most one edit per maxEditShare rules of the new chain (but
// always a few). Beyond that a rewrite is about as cheap and simpler to
// reason about.
const (
	maxEditShare = 8
	minEditBound = 4
)

// editedChain returns c as edits of old when the kernel is known to hold
// exactly old's rules and the two differ by a few inserted and
// deleted rules in the same relative order; otherwise c itself, to be
// rewritten.
//
// Rewriting nat KUBE-SERVICES at 1k services costs iptables-nft ~65 ms
// (it deletes and re-adds every rule); inserting one rule at its place
// costs ~30 ms, most of which is the new service's own chains
// (PERF-FACTS.md, hack/bench). The result holds the same rules in the
// same order as a rewrite, so nothing downstream tells them apart.
func editedChain(c, old *chainRules, installed *installedChains) *chainRules {
	if old == nil || installed.differs(old) {
		return c
	}
	edits, ok := chainEdits(old.rules, c.rules)
	if !ok || len(edits) > max(minEditBound, len(c.rules)/maxEditShare) {
		return c
	}
	return &chainRules{key: c.key, tier: c.tier, rules: c.rules, edits: edits}
}

// chainEdits returns the iptables-restore lines that turn a chain holding
// from into one holding to: "-D chain spec" for each rule that goes, then
// "-I chain N spec" for each new rule at its final position N, ascending.
// After the deletions the chain holds the kept rules in order; inserting
// in ascending final position puts every rule where to has it. It
// reports false when that does not work: a rule appears twice in either
// list (-D would take the first copy) or the kept rules changed order.
func chainEdits(from, to []string) ([]string, bool) {
	inFrom, okFrom := lineSet(from)
	inTo, okTo := lineSet(to)
	if !okFrom || !okTo {
		return nil, false
	}
	var edits []string
	var keptFrom []string
	for _, r := range from {
		if inTo[r] {
			keptFrom = append(keptFrom, r)
		} else {
			edits = append(edits, retarget(r, "-D"))
		}
	}
	kept := 0
	for i, r := range to {
		if !inFrom[r] {
			edits = append(edits, insertAt(r, i+1))
			continue
		}
		if keptFrom[kept] != r {
			return nil, false
		}
		kept++
	}
	return edits, true
}

// lineSet indexes rules, reporting false on a duplicate.
func lineSet(rules []string) (map[string]bool, bool) {
	set := make(map[string]bool, len(rules))
	for _, r := range rules {
		if set[r] {
			return nil, false
		}
		set[r] = true
	}
	return set, true
}

// retarget turns "-A chain spec" into "<cmd> chain spec".
func retarget(rule, cmd string) string {
	return cmd + strings.TrimPrefix(rule, "-A")
}

// insertAt turns "-A chain spec" into "-I chain pos spec".
func insertAt(rule string, pos int) string {
	chain, spec, _ := strings.Cut(strings.TrimPrefix(rule, "-A "), " ")
	var b strings.Builder
	b.Grow(len(rule) + 8)
	b.WriteString("-I ")
	b.WriteString(chain)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(pos))
	if spec != "" {
		b.WriteByte(' ')
		b.WriteString(spec)
	}
	return b.String()
}
