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
# harness, hack/bench/userspace), BENCH_USERSPACE_CONNS (1000),
# BENCH_TAKEOVER (1; 0 skips the takeover at scale), BENCH_TAKEOVER_SERVICES
# (10000), BENCH_SCALE (1; 0 skips the side-by-side scale runs),
# BENCH_SCALE_SIZES ("10000x10 5000x50 44000x1x2"), BENCH_SCALE_PROXIES,
# BENCH_SCALE_CHANGES (20), BENCH_SCALE_BURST (1000), BENCH_SCALE_IPTABLES
# ("1000x10").
# The end-to-end suite of issue 16 (real proxier, the daemon's default
# flags; its rows go into the iptables harness's table after the first-sync
# rows): BENCH_E2E (1; 0 skips it), BENCH_E2E_BACKENDS ("iptables-nft
# iptables-legacy nftables"), BENCH_E2E_NEW_SCALE (1000; 0 skips the new
# services), BENCH_E2E_NEW (20), BENCH_E2E_NEW_GAP (50ms: pause after each
# new service is synced), BENCH_E2E_BURST_SCALE (10000; 0 skips the
# burst), BENCH_E2E_BURST (1000), BENCH_E2E_BURST_OVER (10s),
# BENCH_E2E_SETTLE (5s: pause after the first sync, whose cost the runner's
# budget charges to the next 2 s; 0s measures right after it). A small
# CI-sized run:
#   BENCH_SCALES=1000 BENCH_RUNS=1 BENCH_CHUNKS= BENCH_GO=0 BENCH_E2E_BURST_SCALE=1000 hack/bench.sh
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
$GO build -o "$tmp/bench-nftables" ./hack/bench/nftables
# End to end through the proxier with the daemon's defaults: new services
# on 1k, a burst of EndpointSlice updates at 10k, per backend.
if [ "${BENCH_E2E:-1}" != 0 ]; then
  "$tmp/bench-nftables" -rows "$tmp/e2e.tsv" -endpoints "${BENCH_ENDPOINTS:-10}" \
    -suite-backends "${BENCH_E2E_BACKENDS:-iptables-nft iptables-legacy nftables}" \
    -suite-new-scale "${BENCH_E2E_NEW_SCALE:-1000}" -suite-new "${BENCH_E2E_NEW:-20}" -suite-new-gap "${BENCH_E2E_NEW_GAP:-50ms}" \
    -suite-burst-scale "${BENCH_E2E_BURST_SCALE:-10000}" -suite-burst "${BENCH_E2E_BURST:-1000}" \
    -suite-burst-over "${BENCH_E2E_BURST_OVER:-10s}" -suite-settle "${BENCH_E2E_SETTLE:-5s}"
  args+=(-e2e "$tmp/e2e.tsv")
fi
if [ "${BENCH_IPTABLES:-1}" != 0 ]; then
  $GO build -o "$tmp/bench-iptables" ./hack/bench/iptables
  "$tmp/bench-iptables" "${args[@]}"
elif [ "${BENCH_E2E:-1}" != 0 ]; then
  column -t -s $'\t' "$tmp/e2e.tsv"
fi
# The nftables mode: first sync vs `nft -f` of the same ruleset, end-to-end
# one-endpoint changes and new services through the proxier, RSS.
if [ "${BENCH_NFTABLES:-1}" != 0 ]; then
  "$tmp/bench-nftables" -scales "${BENCH_SCALES:-1000 10000}" -runs "${BENCH_RUNS:-3}" \
    -endpoints "${BENCH_ENDPOINTS:-10}" -changes "${BENCH_NFT_CHANGES:-50}" -new-services "${BENCH_NFT_NEW:-10}"
fi
# Takeover at scale: upstream kube-proxy (nftables) replaced by switchyard
# (nftables), and upstream's own switch from iptables to nftables, with
# BENCH_TAKEOVER_SERVICES background services (10000) x BENCH_ENDPOINTS, a
# client opening a connection every 20 ms throughout: failures and the
# longest gap per flow (e2e TestTakeover, a real apiserver, kube-proxy
# v1.37.1). BENCH_TAKEOVER=0 skips it.
if [ "${BENCH_TAKEOVER:-1}" != 0 ]; then
  $GO build -o "$tmp/switchyard" ./cmd/switchyard
  hack/build-tools.sh >/dev/null
  echo "bench: takeover at ${BENCH_TAKEOVER_SERVICES:-10000} services" >&2
  SWITCHYARD_BIN="$tmp/switchyard" SWITCHYARD_TAKEOVER_SERVICES="${BENCH_TAKEOVER_SERVICES:-10000}" \
    SWITCHYARD_TAKEOVER_ENDPOINTS="${BENCH_ENDPOINTS:-10}" \
    $GO test -tags e2e -count=1 -p 1 -timeout 60m -v \
    -run 'TestTakeover/(kube-proxy-nftables-to-switchyard-nftables|kube-proxy-iptables-to-kube-proxy-nftables|switchyard-nftables-to-kube-proxy-nftables)$' ./e2e/ |
    grep -E 'takeover_test.go|takeover_scale_test.go|^(---|ok|FAIL)' || true
fi
# Scale side by side (e2e TestScale, a real apiserver): for each
# BENCH_SCALE_SIZES entry, SERVICESxENDPOINTS[xPORTS] ("10000x10 5000x50
# 44000x1x2", the issue's three workloads), the proxies of
# BENCH_SCALE_PROXIES ("switchyard:nftables kube-proxy:nftables") in turn
# over the same services: first sync, change latencies
# (BENCH_SCALE_CHANGES, 20) with switchyard's phase breakdown, peak and
# settled RSS, a restart over its own rules, and a burst of
# BENCH_SCALE_BURST (1000) EndpointSlice updates over 10 s; then the
# iptables mode at BENCH_SCALE_IPTABLES ("1000x10"; empty skips it) beside
# kube-proxy's, and BENCH_SCALE_DUAL ("10000x10"; empty skips it) with
# dual-stack Services on a dual-stack node. kube-proxy is cut at 10 min.
# BENCH_SCALE=0 skips it all.
scale_run() { # SIZE PROXIES [FAMILY]
  local size=$1 n e p
  IFS=x read -r n e p <<<"$size"
  echo "bench: scale $size ($2${3:+, $3})" >&2
  SWITCHYARD_SCALE_FAMILY="${3:-ipv4}" \
  SWITCHYARD_BIN="$tmp/switchyard" SWITCHYARD_SCALE_SERVICES="$n" SWITCHYARD_SCALE_ENDPOINTS="$e" \
    SWITCHYARD_SCALE_PORTS="${p:-1}" SWITCHYARD_SCALE_CHANGES="${BENCH_SCALE_CHANGES:-20}" \
    SWITCHYARD_SCALE_TRACE=1 SWITCHYARD_SCALE_RESTART=1 SWITCHYARD_SCALE_BURST="${BENCH_SCALE_BURST:-1000}" \
    SWITCHYARD_SCALE_PROXIES="$2" \
    $GO test -tags e2e -count=1 -p 1 -timeout 150m -v -run '^TestScale$' ./e2e/ |
    grep -E 'scale_test.go|scale_trace_test.go|^ *[|]|^ *[0-9]+ services|: where the time goes|^(---|ok|FAIL)' || true
}
if [ "${BENCH_SCALE:-1}" != 0 ]; then
  $GO build -o "$tmp/switchyard" ./cmd/switchyard
  hack/build-tools.sh >/dev/null
  for size in ${BENCH_SCALE_SIZES:-10000x10 5000x50 44000x1x2}; do
    scale_run "$size" "${BENCH_SCALE_PROXIES:-switchyard:nftables kube-proxy:nftables}"
  done
  for size in ${BENCH_SCALE_IPTABLES-1000x10}; do
    scale_run "$size" "switchyard:iptables kube-proxy:iptables"
  done
  # Dual-stack Services (an IPv4 and an IPv6 slice each) on a dual-stack
  # node: what the second family costs.
  for size in ${BENCH_SCALE_DUAL-10000x10}; do
    scale_run "$size" "${BENCH_SCALE_PROXIES:-switchyard:nftables kube-proxy:nftables}" dual
  done
fi
# Userspace mode: short TCP connections through a userspace ClusterIP vs an
# iptables-mode ClusterIP on the same node namespace (conn/s, p50, p99).
if [ "${BENCH_USERSPACE:-1}" != 0 ]; then
  $GO build -o "$tmp/bench-userspace" ./hack/bench/userspace
  "$tmp/bench-userspace" -conns "${BENCH_USERSPACE_CONNS:-1000}" -runs "${BENCH_RUNS:-3}"
fi
