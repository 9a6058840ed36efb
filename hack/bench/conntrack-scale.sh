#!/usr/bin/env bash
# `make conntrack-scale [ENTRIES=1000000]`: stale UDP conntrack cleanup in
# a table of millions of entries (e2e TestConntrackScale), switchyard and
# upstream kube-proxy v1.37.1 (iptables mode) in turn, each in a node
# network namespace of its own with its own table; the entries are
# inserted through netlink in bulk. Needs root. Not part of `make test`.
#
# net.netfilter.nf_conntrack_max is machine-wide and read-only inside a
# network namespace: when it is below ENTRIES + 10% + 100000 this script
# raises it for the run and restores the old value when it exits (trap),
# whatever the outcome. nf_conntrack_buckets is left alone.
#
# Knobs (environment): ENTRIES (1000000), PROXIES ("switchyard
# kube-proxy"), PATIENCE (5m: how long a proxy may take to delete the
# stale entries).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  echo "conntrack-scale: needs root (network namespaces, nf_conntrack_max)" >&2
  exit 1
fi
entries=${ENTRIES:-1000000}
tmp=$(mktemp -d)
max=/proc/sys/net/netfilter/nf_conntrack_max
old=$(cat "$max")
restore() {
  if [ "$(cat "$max")" != "$old" ]; then
    echo "$old" >"$max"
    echo "conntrack-scale: net.netfilter.nf_conntrack_max restored to $old"
  fi
  rm -rf "$tmp"
}
trap restore EXIT
$GO build -o "$tmp/switchyard" ./cmd/switchyard
hack/build-tools.sh kube-proxy >/dev/null
need=$((entries + entries / 10 + 100000))
if [ "$old" -lt "$need" ]; then
  echo "conntrack-scale: raising net.netfilter.nf_conntrack_max from $old to $need for the run"
  echo "$need" >"$max"
fi
env SWITCHYARD_BIN="$tmp/switchyard" SWITCHYARD_CONNTRACK_ENTRIES="$entries" \
  ${PROXIES:+SWITCHYARD_CONNTRACK_PROXIES="$PROXIES"} ${PATIENCE:+SWITCHYARD_CONNTRACK_PATIENCE="$PATIENCE"} \
  $GO test -tags e2e -count=1 -p 1 -timeout 120m -v -run '^TestConntrackScale$' ./e2e/ |
  grep -vE '^=== (RUN|PAUSE|CONT)'
