#!/usr/bin/env bash
# `make bench-dataplane`: what each proxy mode costs traffic through a
# Service (e2e TestBenchDataplane; the load generator is
# hack/bench/dataplane). A private kube-apiserver + etcd holds N Services;
# every path (direct, switchyard iptables on iptables-nft and
# iptables-legacy, nftables, userspace, kube-proxy v1.37.1 iptables and
# nftables) gets its own node, client and pod network namespaces, created
# and deleted by the run. Needs root. Not part of `make test`.
#
# Knobs (environment): SIZES ("1000 10000"; when the largest is above 20k,
# e.g. "10000 44000", the background Services are seeded straight into the
# apiserver's etcd, SWITCHYARD_SCALE_SEED=etcd|api overrides), DURATION (3s
# per measurement), ROUNDS (3), PATHS, VIAS ("clusterip nodeport local"),
# WORKLOADS ("short latency stream udp"), CLIENTS (16), SKIP ("PROXY:MODE@N
# ...", e.g. "kube-proxy:iptables@44000": paths not run at that N),
# SYNC_WAIT (10m: a proxy without its first sync by then is not measured at
# that N), OUT (a file that also gets the tables and result lines), FAMILY
# (ipv4, the default, or ipv6: IPv6-only topologies, single-stack IPv6
# measured, eTP=Local and background Services, also when seeded in etcd;
# every table and line says family=...), SWITCHYARD_ARGS (flags added to
# every switchyard path's command line, e.g. "--masquerade-tcp-keep-port").
# ipvs is not here: this host's kernel has no IPVS;
# `make bench-dataplane-vm` (hack/vm/bench-dataplane-vm.sh) runs this benchmark in the QEMU VM for it.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  echo "bench-dataplane: needs root (network namespaces)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO build -o "$tmp/switchyard" ./cmd/switchyard
bin="$tmp/switchyard"
if [ -n "${SWITCHYARD_ARGS:-}" ]; then
  # An exec wrapper: the daemon keeps the PID the harness signals.
  printf '#!/bin/sh\nexec %s "$@" %s\n' "$tmp/switchyard" "$SWITCHYARD_ARGS" >"$tmp/switchyard-args"
  chmod +x "$tmp/switchyard-args"
  bin="$tmp/switchyard-args"
fi
$GO build -o "$tmp/dataplane" ./hack/bench/dataplane
hack/build-tools.sh kube-proxy >/dev/null
env SWITCHYARD_BIN="$bin" SWITCHYARD_BENCH_DP_BIN="$tmp/dataplane" \
  SWITCHYARD_BENCH_DP_SIZES="${SIZES:-1000 10000}" SWITCHYARD_BENCH_DP_DURATION="${DURATION:-3s}" \
  SWITCHYARD_BENCH_DP_ROUNDS="${ROUNDS:-3}" SWITCHYARD_BENCH_DP_CLIENTS="${CLIENTS:-16}" \
  ${PATHS:+SWITCHYARD_BENCH_DP_PATHS="$PATHS"} ${VIAS:+SWITCHYARD_BENCH_DP_VIAS="$VIAS"} \
  ${WORKLOADS:+SWITCHYARD_BENCH_DP_WORKLOADS="$WORKLOADS"} ${OUT:+SWITCHYARD_BENCH_DP_OUT="$OUT"} \
  ${SKIP:+SWITCHYARD_BENCH_DP_SKIP="$SKIP"} ${SYNC_WAIT:+SWITCHYARD_BENCH_DP_SYNC_WAIT="$SYNC_WAIT"} \
  ${FAMILY:+SWITCHYARD_BENCH_DP_FAMILY="$FAMILY"} \
  $GO test -tags e2e -count=1 -p 1 -timeout 300m -v -run '^TestBenchDataplane$' ./e2e/ |
  grep -vE '^=== (RUN|PAUSE|CONT)'
