#!/usr/bin/env bash
# `make bench`: the Go micro-benchmarks of the iptables backend and the
# proxier, then the scale harness (hack/bench/iptables) against real
# iptables in network namespaces it creates and deletes; prints one table.
# Needs root. Not part of `make test`.
#
# Knobs (environment): BENCH_SCALES ("1000 10000"), BENCH_RUNS (3),
# BENCH_MODES ("nft legacy"), BENCH_ENDPOINTS (10), BENCH_PARTIALS (5),
# BENCH_CHUNKS ("1000 4000 10000 20000"; empty skips the sweep),
# BENCH_MEMORY (1), BENCH_GO (1; 0 skips the Go micro-benchmarks),
# BENCH_GOTIME (-benchtime, 3x), BENCH_IPTABLES / BENCH_NFTABLES (1; 0 skips
# that mode's harness), BENCH_NFT_CHANGES (50), BENCH_NFT_NEW (10),
# BENCH_USERSPACE (1; 0 skips the userspace vs iptables connection
# harness, hack/bench/userspace), BENCH_USERSPACE_CONNS (1000). A small
# CI-sized run:
#   BENCH_SCALES=1000 BENCH_RUNS=1 BENCH_CHUNKS= BENCH_GO=0 hack/bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  echo "bench: needs root (network namespaces, iptables)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

args=()
if [ "${BENCH_GO:-1}" != 0 ]; then
  : >"$tmp/gobench.txt"
  for pkg in ./backends/iptables/ ./proxier/; do
    echo "bench: go test -bench $pkg" >&2
    # A package that does not build (work in progress elsewhere) only
    # loses its rows.
    if ! $GO test -run '^$' -bench . -benchmem -benchtime "${BENCH_GOTIME:-3x}" "$pkg" >>"$tmp/gobench.txt" 2>"$tmp/gobench.err"; then
      echo "bench: go test -bench $pkg failed; its rows are missing:" >&2
      tail -20 "$tmp/gobench.err" >&2
    fi
  done
  args+=(-gobench "$tmp/gobench.txt")
fi
if [ "${BENCH_IPTABLES:-1}" != 0 ]; then
  $GO build -o "$tmp/bench-iptables" ./hack/bench/iptables
  "$tmp/bench-iptables" "${args[@]}"
fi
# The nftables mode: first sync vs `nft -f` of the same ruleset, end-to-end
# one-endpoint changes and new services through the proxier, RSS.
if [ "${BENCH_NFTABLES:-1}" != 0 ]; then
  $GO build -o "$tmp/bench-nftables" ./hack/bench/nftables
  "$tmp/bench-nftables" -scales "${BENCH_SCALES:-1000 10000}" -runs "${BENCH_RUNS:-3}" \
    -endpoints "${BENCH_ENDPOINTS:-10}" -changes "${BENCH_NFT_CHANGES:-50}" -new-services "${BENCH_NFT_NEW:-10}"
fi
# Userspace mode: short TCP connections through a userspace ClusterIP vs an
# iptables-mode ClusterIP on the same node namespace (conn/s, p50, p99).
if [ "${BENCH_USERSPACE:-1}" != 0 ]; then
  $GO build -o "$tmp/bench-userspace" ./hack/bench/userspace
  "$tmp/bench-userspace" -conns "${BENCH_USERSPACE_CONNS:-1000}" -runs "${BENCH_RUNS:-3}"
fi
