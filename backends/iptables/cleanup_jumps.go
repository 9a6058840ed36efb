package iptables

import (
	"bytes"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// strayJumps returns, as iptables-restore lines, the deletions of every
// rule outside our own chains that jumps (-j/-g) to a chain this mode
// owns. Cleanup removes them before deleting the chains: besides the
// jumps this mode installs, the ipvs mode jumps to chains of the same
// names (KUBE-SERVICES, KUBE-MARK-MASQ) from built-in chains and from its
// own chains, and a chain still referenced cannot be deleted.
func strayJumps(t table, save []byte) []string {
	var out []string
	for _, r := range runner.ParseSave(save).Rules {
		if !isOwnedChain(t, r.Chain) && r.Target != "" && isOwnedChain(t, r.Target) {
			out = append(out, r.DeleteLine())
		}
	}
	return out
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
