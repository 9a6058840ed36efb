package sweep

import (
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// Owner reports whether the running mode owns a chain: such chains (and the
// jumps to them) are never swept.
type Owner func(table, chain string) bool

// TableResult is what Plan found in one table.
type TableResult struct {
	Table   string
	Deleted []string // leftover chains the payload deletes
	Jumps   int      // rules of built-in chains the payload deletes
	Kept    []string // leftover chains kept: still entered from elsewhere
}

// Plan builds the restore section ("*table ... COMMIT") that removes the
// table's leftover chains; nil when there is nothing to remove.
func Plan(table string, save []byte, owned Owner) ([]byte, TableResult) {
	res := TableResult{Table: table}
	// The table is read lean: right after a first sync at 10k services x
	// 10 endpoints, nat holds ~320k rules of the running mode's own, and
	// parsing all of them held ~3x the save.
	chains := runner.SavedChains(save)
	leftover := map[string]bool{}
	for _, c := range chains {
		if Known(table, c) && (owned == nil || !owned(table, c)) {
			leftover[c] = true
		}
	}
	if len(leftover) == 0 {
		return nil, res
	}
	// Only the rules in or to a leftover chain matter below.
	rules := runner.SavedRulesFunc(save, func(chain, target []byte) bool {
		return leftover[string(chain)] || leftover[string(target)]
	})
	var jumps []runner.SavedRule
	var pinned []string
	for _, r := range rules {
		switch {
		case leftover[r.Chain] || !leftover[r.Target]:
		case runner.IsBuiltinChain(r.Chain):
			jumps = append(jumps, r)
		default:
			pinned = append(pinned, r.Target)
		}
	}
	kept := reachable(pinned, rules, leftover)
	for _, c := range chains {
		switch {
		case kept[c]:
			res.Kept = append(res.Kept, c)
		case leftover[c]:
			res.Deleted = append(res.Deleted, c)
		}
	}
	jumps = slices.DeleteFunc(jumps, func(r runner.SavedRule) bool { return kept[r.Target] })
	res.Jumps = len(jumps)
	if len(res.Deleted) == 0 && len(jumps) == 0 {
		return nil, res
	}
	return payload(table, res.Deleted, jumps), res
}

// reachable is every leftover chain reached from the pinned ones through
// leftover chains: none of them can go.
func reachable(pinned []string, rules []runner.SavedRule, leftover map[string]bool) map[string]bool {
	out := map[string]bool{}
	for len(pinned) > 0 {
		c := pinned[len(pinned)-1]
		pinned = pinned[:len(pinned)-1]
		if out[c] {
			continue
		}
		out[c] = true
		for _, r := range rules {
			if r.Chain == c && leftover[r.Target] {
				pinned = append(pinned, r.Target)
			}
		}
	}
	return out
}

// payload flushes the chains (declaring a chain in a --noflush restore
// empties it), deletes the jumps, then the chains: after the flushes no
// leftover chain enters another.
func payload(table string, chains []string, jumps []runner.SavedRule) []byte {
	var b strings.Builder
	b.WriteString("*" + table + "\n")
	for _, c := range chains {
		b.WriteString(":" + c + " - [0:0]\n")
	}
	for _, j := range jumps {
		b.WriteString(j.DeleteLine() + "\n")
	}
	for _, c := range chains {
		b.WriteString("-X " + c + "\n")
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}
