package iptables

import (
	"bytes"
	"strings"
)

// strayJumps returns, as iptables-restore lines, the deletions of every
// rule outside our own chains that jumps (-j/-g) to a chain this mode
// owns. Cleanup removes them before deleting the chains: besides the
// jumps this mode installs, the ipvs mode jumps to chains of the same
// names (KUBE-SERVICES, KUBE-MARK-MASQ) from built-in chains and from its
// own chains, and a chain still referenced cannot be deleted.
func strayJumps(t table, save []byte) []string {
	var out []string
	for _, line := range strings.Split(string(save), "\n") {
		chain, rest, ok := strings.Cut(strings.TrimPrefix(line, "-A "), " ")
		if !strings.HasPrefix(line, "-A ") || !ok || isOwnedChain(t, chain) {
			continue
		}
		if target := savedJumpTarget(rest); target != "" && isOwnedChain(t, target) {
			out = append(out, "-D "+chain+" "+rest)
		}
	}
	return out
}

// savedJumpTarget is the chain after the last -j or -g of a saved rule.
func savedJumpTarget(rule string) string {
	fields := strings.Fields(rule)
	for i := len(fields) - 2; i >= 0; i-- {
		if fields[i] == "-j" || fields[i] == "-g" {
			return fields[i+1]
		}
	}
	return ""
}

// jumpDeletePayload wraps per-table deletions into one restore payload.
func jumpDeletePayload(byTable map[table][]string) []byte {
	var b bytes.Buffer
	for _, t := range allTables() {
		if len(byTable[t]) == 0 {
			continue
		}
		b.WriteString("*" + string(t) + "\n")
		for _, l := range byTable[t] {
			b.WriteString(l + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.Bytes()
}
