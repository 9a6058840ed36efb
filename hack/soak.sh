#!/usr/bin/env bash
# `make soak`: switchyard and upstream kube-proxy v1.37.1 side by side, each
# in its own node network namespace against one private kube-apiserver
# holding SERVICES Services x ENDPOINTS endpoints, under continuous churn
# through the API for SOAK_MIN minutes (e2e TestSoak). Every 30 s a row per
# proxy: RSS, VmHWM, Go heap, goroutines, open fds, syncs and their p99,
# sync failures, the kernel's service/endpoint counts against the API's,
# and a prober's answers through a churned Service. It ends with a table
# side by side and one line per proxy:
#   soak: proxy=switchyard minutes=60 rss_mb_per_h=... goroutines_per_h=... fds_per_h=... sync_failures=0 failed_connections=0 mismatches=0
# Needs root (network namespaces, created and deleted by the run). Not part
# of `make test`. SIGTERM to the test process (e2e.test) ends a run early:
# it prints the summary and the result lines for the minutes run and
# cleans up as at the end.
#
# Knobs (environment): SOAK_MIN (60), MODE (nftables; iptables), SERVICES
# (10000), ENDPOINTS (10), WARMUP (10m: samples before it are left out of
# the slopes), SAMPLE (30s), SEED (etcd: the background Services are written
# straight into the apiserver's etcd; api: created through the API), OUT (a
# file that also gets the tables and result lines).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  echo "soak: needs root (network namespaces)" >&2
  exit 1
fi
min=${SOAK_MIN:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO build -o "$tmp/switchyard" ./cmd/switchyard
hack/build-tools.sh kube-proxy >/dev/null
env SWITCHYARD_BIN="$tmp/switchyard" SWITCHYARD_SOAK_MIN="$min" \
  SWITCHYARD_SOAK_MODE="${MODE:-nftables}" SWITCHYARD_SOAK_SERVICES="${SERVICES:-10000}" \
  SWITCHYARD_SOAK_ENDPOINTS="${ENDPOINTS:-10}" SWITCHYARD_SCALE_SEED="${SEED:-etcd}" \
  ${WARMUP:+SWITCHYARD_SOAK_WARMUP="$WARMUP"} ${SAMPLE:+SWITCHYARD_SOAK_SAMPLE="$SAMPLE"} \
  ${OUT:+SWITCHYARD_SOAK_OUT="$OUT"} \
  $GO test -tags e2e -count=1 -p 1 -timeout "$((min + 60))m" -v -run '^TestSoak$' ./e2e/ |
  grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'
