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
// the hot path (periodic syncs count rules without iptables-save, see
// below).
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
//     transaction. The first full sync saves each table once (leftover
//     chains, jumps already in place, table sizes): into near-empty tables
//     on iptables-nft it is one transaction whose sections start with
//     "-S", which stops iptables-nft's per-command linear search of the
//     chains a transaction names (firstsync.go; at the floor of a plain
//     restore), and the missing jumps go into the restore. On nft chains
//     are declared in write order, never sorted (payload.go: sorted
//     creation overflows iptables-nft-save's stack at ~100k chains).
//     Payloads are streamed into iptables-restore's stdin as they are
//     rendered (runner.StreamRestorer), and a full sync holds the rules
//     of one service port at a time: it plans with fingerprints, and the
//     payload, a pure iterator of pieces, renders each port again as
//     apply asks for its chains (payload.go, sealed.go).
//   - A partial sync re-renders only the service ports the Diff names,
//     writes only their chains whose rules changed and deletes their
//     chains that went away, in one small transaction. When a service
//     appeared, went or changed what it contributes to the top-level
//     chains (KUBE-SERVICES, KUBE-NODEPORTS, the filter chains), those are
//     edited in place, "-D chain rule" and "-I chain N rule" (edits.go),
//     rather than flushed and refilled: at 1k services rewriting nat
//     KUBE-SERVICES cost iptables-nft ~65 ms, the edit a few.
//   - A periodic sync (Diff.Verify), or a partial sync when the last check
//     is older than Config.VerifyInterval (two thirds of the sync period,
//     proxier.CheckInterval), verifies what
//     was written. It first reads a fingerprint of the kernel's rules in
//     one system call (the nf_tables generation; the legacy tables' entry
//     counts and sizes): unchanged since the last sync, nobody else wrote
//     and nothing is read (fingerprint.go; ~1 ms at 10k services x 10
//     endpoints). Changed, it compares every chain written, service chains
//     included, with the kernel, without iptables-save (verify.go):
//     on legacy one IPT_SO_GET_ENTRIES read per table gives every chain's
//     rule count and the built-in jumps (0.63-0.71 s of CPU at 10k x 10);
//     on nft one netlink dump of the chains gives each chain's use count
//     (its rules plus the jumps to it), compared with the rules written
//     plus the jumps learnt, and only the chains that moved get their
//     rules counted (0.27-0.79 s). An operator's `iptables -t nat -F
//     KUBE-SVC-...` leaves the canaries and KUBE-SERVICES in place; it is
//     found this way.
//   - Chains found changed are repaired by the same sync, partially, when
//     they are the chains of at most 256 service ports or top-level/base
//     chains: those ports are re-rendered and the changed chains rewritten
//     in one small transaction (repair.go). At 10k x 10 a flushed
//     KUBE-SVC chain was found and rewritten by that sync in 0.6-1.2 s
//     on nft and 2.7-3.2 s on legacy (which rewrites the whole table on
//     every commit), a flushed KUBE-SERVICES in 2.2-2.9 s / 2.3-2.8 s. A
//     missing canary or jump from a built-in chain, or a wholesale flush,
//     turns the sync into a full one.
//
// A failed restore stops the sync, logs only the offending lines, counts
// kubeproxy_sync_proxy_rules_iptables_restore_failures_total and makes
// the next sync full; the rules in force stay valid because each
// transaction is atomic per table and the ordering keeps references valid.
// A restore that iptables rejects only for deleting a chain someone else
// still references is committed again without the deletions: the new
// rules take effect and the next full sync retries (apply.go).
//
// With --service-traffic-metrics (Config.ServiceTraffic) mangle
// KUBE-SERVICE-TRAFFIC, jumped to from mangle PREROUTING and OUTPUT,
// matches every packet against hash:ip,port ipsets with counters whose
// members are the service addresses, commented "namespace/name:port":
// one lookup per packet, not a rule per Service (servicetraffic.go). The
// sets are kept by difference before each sync's restore, through
// CounterSets; ServiceTraffic reads them at scrape time.
//
// The jumps from the built-in chains (PREROUTING, OUTPUT, POSTROUTING,
// INPUT, FORWARD) are not in the payload: other programs own those chains.
// They are ensured one by one on full syncs, and removed by Cleanup.
//
// The code, in the order a sync runs:
//
//   - backend.go: Backend, the proxier.Backend: each Sync runs every
//     family, between reading and recording the kernel's fingerprint.
//   - sync.go: familySync, one family's decisions: full, partial or
//     partial with a repair (reconcile.Cadence says when to verify), and
//     the transactions each plans.
//   - render.go, service.go, servicerules.go, rulewriter.go, ruleset.go,
//     chains.go, sealed.go, edits.go: the pure render, State -> Ruleset
//     (chains and rules), and payload.go, the transactions and the
//     iptables-restore input they yield, piece by piece.
//   - apply.go: the kernel writes: restore transactions, jumps, Cleanup
//     (with cleanup_jumps.go); installed.go, what they left in the kernel.
//   - fingerprint.go, verify.go, verify_list.go, firstsync.go: the kernel
//     reads a sync's decisions use; repair.go and firstsync.go, what a
//     repair or a first sync plans from them.
//   - servicetraffic.go: the counter ipsets, kept before each sync's
//     rules; config.go: the configuration.
package iptables
