#!/usr/bin/env bash
# smoke.sh: the real-node smoke test of `make test`. Brings the local cluster
# up in $MODE with the address families of $FAMILY (binaries and images from
# cache after the first run), builds a second switchyard image (same code,
# another version string) and imports it, runs e2e/node's TestNodeSmoke (DaemonSet Ready, ClusterIP, DNS and
# NodePort from a pod, rolling update to the second image with zero failed
# connections), and tears the cluster down whatever happened.
#
# It also prints the daemons' memory and CPU on the idle nodes (usage.sh).
#
# On a dual-stack cluster (FAMILY=dual) every check is made in both families.
#
# Environment: MODE (default iptables), FAMILY (ipv4, ipv6 or dual; default
# ipv4), DEPLOY (kustomize or helm: how switchyard is installed, and with
# helm the rolling update is a `helm upgrade` to the second tag), KEEP=1
# leaves the cluster up, USAGE_SECONDS (20) the idle window.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cluster="$root/hack/cluster/cluster.sh"
export MODE="${MODE:-iptables}" FAMILY="${FAMILY:-ipv4}"
export VERSION="${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}"
t0=$SECONDS

absent="$(mktemp)"
# One cluster per machine: its network namespaces and ports are fixed.
# Never tear down a cluster another run brought up.
if ip netns list | grep -qE '^syk-(cp|node[0-9]+)( |$)'; then
  echo "${0##*/}: a cluster is already up (netns syk-*): another run owns it; not starting" >&2
  exit 1
fi
"$cluster" absent-paths >"$absent"

finish() {
  local rc=$?
  if [ "${KEEP:-}" = 1 ]; then echo "smoke: cluster left up (KEEP=1): $cluster env" >&2
  else
    "$cluster" down || rc=1
    # Teardown is part of the test: nothing of the cluster may remain.
    "$cluster" leftovers "$absent" >&2 || { echo "smoke: teardown left the above behind" >&2; rc=1; }
  fi
  rm -f "$absent"
  echo "smoke: ${MODE} mode ($FAMILY), $((SECONDS - t0))s in all, exit $rc" >&2
  exit "$rc"
}
trap finish EXIT

"$cluster" up
eval "$("$cluster" env)"
rollout="$VERSION-rollout"
tar="$(VERSION="$rollout" IMAGE_ARCHES="${IMAGE_ARCHES:-$(dpkg --print-architecture)}" \
  "$root/hack/image/build.sh" switchyard | sed -n 's/^switchyard=//p')"
"$cluster" import "$tar"
# The node's image carries VERSION: leave bin/switchyard as `make build` makes it.
make -C "$root" --no-print-directory build VERSION="$VERSION" >/dev/null
kubectl="$(dirname "$("$root/hack/build-tools.sh" kubectl | tail -n1)/kubectl")/kubectl"
# The daemon's footprint on the idle nodes, before the test adds load.
"$root/hack/cluster/usage.sh" "${USAGE_SECONDS:-20}"
if [ "${DEPLOY:-kustomize}" = helm ]; then
  export SMOKE_HELM="$("$root/hack/build-tools.sh" helm | tail -n1)/helm" SMOKE_HELM_CHART="$root/deploy/helm/switchyard"
fi
SMOKE_MODE="$MODE" SMOKE_FAMILY="$FAMILY" SMOKE_KUBECONFIG="$KUBECONFIG" SMOKE_KUBECTL="$kubectl" SMOKE_ROLLOUT_IMAGE="localhost/switchyard:$rollout" \
  go -C "$root" test -tags node -count=1 -timeout 15m -v -run '^TestNodeSmoke$' ./e2e/node/
