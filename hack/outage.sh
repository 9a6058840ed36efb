#!/usr/bin/env bash
# `make outage`: the kube-apiserver goes away under switchyard and upstream
# kube-proxy v1.37.1 (same mode, side by side, each on a node network
# namespace of its own) while a private kube-apiserver + etcd holds N
# Services (e2e TestOutage). Each outage stops the apiserver for OUTAGE_DOWN,
# changes CHANGED Services straight in etcd meanwhile and starts it again;
# then etcd is killed under the running apiserver, and the apiserver is
# restarted at once. Probers connect through existing Services throughout
# (TCP and UDP); the run prints a table and one result line per proxy and
# scenario. Needs root. Not part of `make test`.
#
# Knobs (environment): OUTAGE_DOWN (120: seconds the apiserver is down),
# OUTAGE_LONG (seconds of a second, long outage, e.g. 600; none by
# default), SERVICES (10000), CHANGED (100), MODE (iptables; or nftables),
# ETCD_DOWN (20: seconds etcd stays killed), OUT (a file that also gets the
# table and result lines).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  echo "outage: needs root (network namespaces)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO build -o "$tmp/switchyard" ./cmd/switchyard
hack/build-tools.sh kube-proxy kube-apiserver etcd >/dev/null
downs="${OUTAGE_DOWN:-120}s${OUTAGE_LONG:+ ${OUTAGE_LONG}s}"
env SWITCHYARD_BIN="$tmp/switchyard" SWITCHYARD_OUTAGE_DOWN="$downs" \
  SWITCHYARD_OUTAGE_SERVICES="${SERVICES:-10000}" SWITCHYARD_OUTAGE_CHANGED="${CHANGED:-100}" \
  SWITCHYARD_OUTAGE_MODE="${MODE:-iptables}" SWITCHYARD_OUTAGE_ETCD_DOWN="${ETCD_DOWN:-20}s" \
  ${OUT:+SWITCHYARD_OUTAGE_OUT="$OUT"} \
  $GO test -tags e2e -count=1 -p 1 -timeout 120m -v -run '^TestOutage$' ./e2e/ |
  grep -vE '^=== (RUN|PAUSE|CONT)'
