// Command iptables is switchyard's scale benchmark of the iptables proxy
// mode against real iptables, run by `make bench` (hack/bench.sh), never
// by `make test`.
//
// For each iptables backend (nft, legacy) and scale (services x
// endpoints) it does, every run inside a fresh network namespace it
// creates and deletes:
//
//   - a first full sync of switchyard (Backend.Sync into the empty
//     namespace, wall time), next to the floor: one plain iptables-restore
//     (no --noflush, one transaction) of the same rules in another fresh
//     namespace (what the first run installed, read back with
//     iptables-save, so the jumps from the built-in chains are in it);
//   - one-endpoint changes (partial syncs, wall time), next to the floor
//     of any change at that table size (a restore adding one chain with
//     one rule);
//   - switchyard's own CPU time during each sync (getrusage(RUSAGE_SELF)
//     deltas: the Go side only, iptables-restore children excluded) as a
//     share of the sync's wall time; and the CPU of the iptables children
//     (RUSAGE_CHILDREN), which holds up better than wall time on a busy
//     machine.
//
// It also measures the Go heap and RSS of a fresh process after one full
// sync at the largest scale (a child run of this binary), and the full
// sync time at the largest nft scale for several Config.ChunkRules, so
// the default chunk size is chosen by measurement.
//
// Figures are medians of BENCH_RUNS runs. The machine is shared: read them
// as ratios. Knobs (environment, or the matching flags): BENCH_SCALES
// ("1000 10000"), BENCH_RUNS (3), BENCH_MODES ("nft legacy"),
// BENCH_ENDPOINTS (10), BENCH_PARTIALS (5 per run), BENCH_CHUNKS ("1000
// 4000 10000 20000"; empty skips the chunk sweep), BENCH_MEMORY (1; 0
// skips the memory probe). It needs root and never touches the host
// namespace's rules.
package main
