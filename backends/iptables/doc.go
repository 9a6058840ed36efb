// Package iptables is switchyard's iptables proxy mode: kube-proxy's
// iptables rules (same chains, names, comments and packet paths), applied
// so that it scales.
//
// Render is pure: render(config, State) gives, per IP family, the desired
// Ruleset — every chain this mode owns in the mangle, filter and nat
// tables with its rules, built from the shared endpoint selection
// (proxier.SelectEndpoints). Chain names hash the same inputs as
// kube-proxy's, so they are stable across restarts and identical to
// kube-proxy's on a node that switches over.
//
// Apply does the I/O through runner.Interface and remembers, per family,
// a fingerprint of every chain it wrote; it never saves a whole table on
// the hot path (periodic syncs list a few top-level chains, see below).
//
//   - A full sync (first sync, Diff.Full, a canary chain gone, or after any
//     failure) writes every chain as a sequence of iptables-restore
//     --noflush transactions of bounded size (Config.ChunkRules, default
//     4,000 lines), each holding and declaring whole chains: iptables-nft
//     is quadratic in the size of one --noflush transaction and linear in
//     bounded ones. Transactions go bottom-up (KUBE-SEP, then KUBE-SVC/SVL,
//     KUBE-EXT, KUBE-FW, then KUBE-NODEPORTS, KUBE-SERVICES and the filter
//     chains), then delete the chains that went away, so every
//     intermediate state only jumps to chains that exist. On legacy
//     iptables, which rewrites the whole table at each commit, it is one
//     transaction.
//   - A partial sync re-renders only the service ports the Diff names,
//     writes only their chains whose rules changed (plus the top-level
//     chains if a service appeared, went or changed what it contributes to
//     them) and deletes their chains that went away, in one small
//     transaction.
//   - A periodic sync (Diff.Verify), or a partial sync when the last check
//     is older than Config.VerifyInterval, first lists the top-level
//     chains and the built-in chains holding the jumps, one chain each
//     (never a whole table), and compares their rule counts with what was
//     written: an operator's `iptables -t nat -F` leaves the canaries in
//     place, and a mismatch turns the sync into a full one (verify.go).
//
// A failed restore stops the sync, logs only the offending lines, counts
// kubeproxy_sync_proxy_rules_iptables_restore_failures_total and makes
// the next sync full; the rules in force stay valid because each
// transaction is atomic per table and the ordering keeps references valid.
// A restore that iptables rejects only for deleting a chain someone else
// still references is committed again without the deletions: the new
// rules take effect and the next full sync retries (apply_deletes.go).
//
// The jumps from the built-in chains (PREROUTING, OUTPUT, POSTROUTING,
// INPUT, FORWARD) are not in the payload: other programs own those chains.
// They are ensured one by one on full syncs, and removed by Cleanup.
package iptables
