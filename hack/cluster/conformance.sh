#!/usr/bin/env bash
# conformance.sh: upstream's [sig-network] e2e suite (e2e.test v1.37.1, built
# from hack/tools/e2e) against the local cluster with PROXY (switchyard or
# kube-proxy) in MODE, on a cluster of FAMILY (ipv4, ipv6 or dual). Leaves
# ginkgo's JUnit report and the suite's log under
# _output/conformance/<proxy>-<mode>-<family>/ and prints
# "conformance: N passed, M failed, K skipped" as its last line.
#
# The skip list is that of upstream's sig-network kind job for the family
# (ci-kubernetes-kind-network, -network-ipv6, -network-dual in test-infra's
# config/jobs/kubernetes/sig-network/sig-network-kind.yaml), plus only what
# this machine cannot do (SKIP_HERE below, each with its reason).
#
# The specs run in PROCS (default 4) parallel ginkgo processes (most of a
# spec's time is waiting for pods); [Serial] specs run alone at the end.
#
# Environment: MODE (iptables), PROXY (switchyard), FAMILY (ipv4), FOCUS (default
# \[sig-network\]), PROCS (4), KEEP=1 leaves the cluster up, E2E_ARGS (extra
# flags for e2e.test), OUT (the report directory). Before the teardown, the
# proxy's pod logs, each node's rule dumps and the cluster's component logs
# are copied to <report directory>/cluster/.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cluster="$root/hack/cluster/cluster.sh"
export MODE="${MODE:-iptables}" PROXY="${PROXY:-switchyard}" FAMILY="${FAMILY:-ipv4}" CONFORMANCE_IMAGES=1
FOCUS="${FOCUS:-\[sig-network\]}"
# What this machine cannot do, on every cluster shape:
#  SCTP            the kernel has no SCTP module
#  Internet        "should provide Internet connection for containers" dials
#                  google.com: nothing here may leave the machine (CoreDNS has
#                  no forwarder, the namespaces no route out)
#  PTR forward     "should forward PTR records lookup to upstream nameserver"
#                  first resolves 8.8.8.8's PTR (dns.google.) through the
#                  cluster DNS's default upstream, i.e. the Internet
# (The IPv6 and dual-stack jobs skip the last two themselves.)
SKIP_HERE='SCTP|\[Feature:SCTPConnectivity\]|Internet connection for containers|should forward PTR records lookup to upstream nameserver'
# Upstream's sig-network kind job of the family skips these.
case "$FAMILY" in
  ipv4)
    # ci-kubernetes-kind-network
    SKIP_UPSTREAM='\[Feature:(Networking-IPv6|Example|Federation|PerformanceDNS)\]|LB.health.check|LoadBalancer|load.balancer|GCE|NetworkPolicy|DualStack'
    # IPv6: an IPv4-only cluster has no IPv6 node or pod addresses.
    SKIP_HERE="$SKIP_HERE|IPv6" ;;
  ipv6)
    # ci-kubernetes-kind-network-ipv6
    SKIP_UPSTREAM='\[Feature:(Networking-IPv4|Example|Federation|PerformanceDNS)\]|Internet.connection|upstream.nameserver|LB.health.check|LoadBalancer|load.balancer|GCE|NetworkPolicy|DualStack' ;;
  dual)
    # ci-kubernetes-kind-network-dual: the DualStack specs run.
    SKIP_UPSTREAM='\[Feature:(Networking-IPv4|Example|Federation|PerformanceDNS)\]|Internet.connection|upstream.nameserver|LB.health.check|LoadBalancer|load.balancer|GCE|NetworkPolicy' ;;
  *) echo "conformance: FAMILY=$FAMILY: want ipv4, ipv6 or dual" >&2; exit 2 ;;
esac
out="${OUT:-$root/_output/conformance/$PROXY-$MODE-$FAMILY}"
t0=$SECONDS

# collect: what diagnosing a failure needs once the cluster is gone, into
# $out/cluster/: the proxy's pod logs (the current and any previous
# container) and each node's rules as the kernel holds them (nft list
# ruleset, iptables-save and ip6tables-save inside the node's namespace).
collect() {
  local dir="$out/cluster" n ns p
  [ -n "${CLUSTER_DIR:-}" ] && [ -f "$CLUSTER_DIR/admin.kubeconfig" ] || return 0
  rm -rf "$dir"; mkdir -p "$dir"
  for p in $("$kubectl" --kubeconfig "$CLUSTER_DIR/admin.kubeconfig" -n kube-system get pods -l k8s-app=kube-proxy -o name 2>/dev/null); do
    "$kubectl" --kubeconfig "$CLUSTER_DIR/admin.kubeconfig" -n kube-system logs "$p" >"$dir/${p#pod/}.log" 2>&1 || true
    "$kubectl" --kubeconfig "$CLUSTER_DIR/admin.kubeconfig" -n kube-system logs --previous "$p" >"$dir/${p#pod/}.previous.log" 2>/dev/null ||
      rm -f "$dir/${p#pod/}.previous.log"
  done
  for n in $(seq "${NODES:-2}"); do
    ns="/run/netns/syk-node$n"
    [ -e "$ns" ] || continue
    nsenter --net="$ns" nft list ruleset >"$dir/node$n.nft" 2>&1 || true
    nsenter --net="$ns" iptables-save >"$dir/node$n.iptables" 2>&1 || true
    nsenter --net="$ns" ip6tables-save >"$dir/node$n.ip6tables" 2>&1 || true
  done
  cp -r "$CLUSTER_DIR/logs" "$dir/logs" 2>/dev/null || true
}

finish() {
  local rc=$?
  collect || true
  [ "${KEEP:-}" = 1 ] || "$cluster" down >&2 || true
  exit "$rc"
}

# summary JUNIT: "N passed, M failed, K skipped" from ginkgo's JUnit report
# (specs only: the per-process suite setup entries are not counted).
summary() {
  python3 - "$1" <<'EOF'
import sys, xml.etree.ElementTree as ET
p = f = s = 0
for tc in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    if not tc.get("name", "").startswith("[It]"): continue  # suite setup nodes
    if tc.find("skipped") is not None: s += 1
    elif tc.find("failure") is not None or tc.find("error") is not None: f += 1
    else: p += 1
print(f"{p} passed, {f} failed, {s} skipped")
EOF
}

if [ "$MODE" = ipvs ] && [ ! -d /sys/module/ip_vs ] && ! grep -qw ip_vs "/lib/modules/$(uname -r)/modules.builtin" 2>/dev/null; then
  # No IP_VS in this kernel (and nothing may load modules here): the
  # suite cannot judge ipvs mode on this machine. Said, not faked.
  echo "conformance: ipvs mode cannot run here: kernel $(uname -r) has no IP_VS" >&2
  exit 2
fi
mkdir -p "$out"
e2e="$("$root/hack/build-tools.sh" e2e.test | tail -n1)/e2e.test"
ginkgo="$(dirname "$e2e")/ginkgo"
"$root/hack/build-tools.sh" ginkgo >/dev/null
kubectl="$("$root/hack/build-tools.sh" kubectl | tail -n1)/kubectl"
trap finish EXIT
"$cluster" up
eval "$("$cluster" env)"
echo "conformance: $PROXY in $MODE mode ($FAMILY), cluster up after $((SECONDS - t0))s" >&2
# The suite runs inside the control plane's namespace, where node IPs,
# NodePorts and pod IPs of every family are reachable as from kind's host. --num-nodes as
# kind's job passes it: otherwise only the first ginkgo process counts the
# nodes, and specs that need two skip themselves in the other processes.
rc=0
nsenter --net=/run/netns/syk-cp -- "$ginkgo" -p --procs="${PROCS:-4}" --timeout=8h --no-color \
  --focus="$FOCUS" --skip="$SKIP_UPSTREAM|$SKIP_HERE" --junit-report=junit.xml --output-dir="$out" \
  "$e2e" -- --provider=skeleton --kubeconfig="$CLUSTER_DIR/admin-internal.kubeconfig" \
  --num-nodes="${NODES:-2}" --kubectl-path="$kubectl" --report-dir="$out" ${E2E_ARGS:-} >"$out/e2e.log" 2>&1 || rc=$?
echo "conformance: suite exit $rc after $((SECONDS - t0))s; log $out/e2e.log" >&2
[ -s "$out/junit.xml" ] || { echo "conformance: no JUnit report" >&2; exit 1; }
echo "conformance: $(summary "$out/junit.xml")"
