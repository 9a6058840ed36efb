#!/usr/bin/env bash
# `make conntrack-scale [ENTRIES=1000000]`: stale UDP conntrack cleanup in
# a table of millions of entries (e2e TestConntrackScale), switchyard and
# upstream kube-proxy v1.37.1 (iptables mode) in turn, each in a node
# network namespace of its own with its own table; the entries are
# inserted through netlink in bulk. Needs root. Not part of `make test`.
#
# net.netfilter.nf_conntrack_max and net.netfilter.nf_conntrack_buckets
# (the hash table, shared by every namespace) are machine-wide and
# read-only inside a network namespace. When max is below ENTRIES + 10% +
# 100000, or the buckets below ENTRIES / 4 (kube-proxy's ratio), this
# script raises them for the run and restores the old values when it exits
# (trap), whatever the outcome. (With 262144 buckets the kernel refused a
# few of 4M entries: ENOSPC, a hash chain over its length limit.)
#
# Knobs (environment): ENTRIES (1000000), PROXIES ("switchyard
# kube-proxy"), PATIENCE (5m: how long a proxy may take to delete the
# stale entries), FAMILY (ipv4, or ipv6: an IPv6-only node, Services,
# synthetic entries and real flow; its result lines carry family=ipv6).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
if [ "$(id -u)" != 0 ]; then
  echo "conntrack-scale: needs root (network namespaces, nf_conntrack_max)" >&2
  exit 1
fi
entries=${ENTRIES:-1000000}
family=${FAMILY:-ipv4}
case "$family" in
ipv4 | ipv6) ;;
*)
  echo "conntrack-scale: FAMILY=$family: want ipv4 or ipv6" >&2
  exit 1
  ;;
esac
tmp=$(mktemp -d)
max=/proc/sys/net/netfilter/nf_conntrack_max
buckets=/proc/sys/net/netfilter/nf_conntrack_buckets
old=$(cat "$max")
old_buckets=$(cat "$buckets")
restore() {
  if [ "$(cat "$max")" != "$old" ]; then
    echo "$old" >"$max"
    echo "conntrack-scale: net.netfilter.nf_conntrack_max restored to $old"
  fi
  if [ "$(cat "$buckets")" != "$old_buckets" ]; then
    echo "$old_buckets" >"$buckets"
    echo "conntrack-scale: net.netfilter.nf_conntrack_buckets restored to $old_buckets"
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
need_buckets=$((entries / 4))
if [ "$old_buckets" -lt "$need_buckets" ]; then
  echo "conntrack-scale: raising net.netfilter.nf_conntrack_buckets from $old_buckets to $need_buckets for the run"
  echo "$need_buckets" >"$buckets"
fi
env SWITCHYARD_BIN="$tmp/switchyard" SWITCHYARD_CONNTRACK_ENTRIES="$entries" SWITCHYARD_CONNTRACK_FAMILY="$family" \
  ${PROXIES:+SWITCHYARD_CONNTRACK_PROXIES="$PROXIES"} ${PATIENCE:+SWITCHYARD_CONNTRACK_PATIENCE="$PATIENCE"} \
  $GO test -tags e2e -count=1 -p 1 -timeout 120m -v -run '^TestConntrackScale$' ./e2e/ |
  grep -vE '^=== (RUN|PAUSE|CONT)'
