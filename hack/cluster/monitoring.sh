#!/usr/bin/env bash
# monitoring.sh: switchyard's dashboards and alerts against a real
# Prometheus on the real cluster (`make node-monitoring`). Brings the local
# cluster up in $MODE (default nftables, IPv4), installs switchyard with the
# Helm chart, metrics on 0.0.0.0:10249, the metrics Service and
# --service-traffic-metrics, then runs e2e/node's TestNodeMonitoring:
# Prometheus (Debian's) in the control plane's network namespace discovers
# the pods as the chart's ServiceMonitor would, every query of the
# kubernetes-mixin kube-proxy dashboard and of switchyard's dashboard must
# return data, every alert must fire when its condition is produced, and
# the dashboard is drawn to docs/img/dashboard.png. Tears the cluster down
# whatever happened. Ends with one line: "monitoring: queries=N
# with_data=N alerts=N fired=N".
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cluster="$root/hack/cluster/cluster.sh"
export MODE="${MODE:-nftables}" FAMILY="${FAMILY:-ipv4}" DEPLOY=helm
export VERSION="${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}"
t0=$SECONDS
absent="$(mktemp)"
values="$(mktemp --suffix=.yaml)"
# One cluster per machine: its network namespaces and ports are fixed.
# Never tear down a cluster another run brought up.
if ip netns list | grep -qE '^syk-(cp|node[0-9]+)( |$)'; then
  echo "${0##*/}: a cluster is already up (netns syk-*): another run owns it; not starting" >&2
  exit 1
fi
"$cluster" absent-paths >"$absent"
cat >"$values" <<'VALUES'
metricsBindAddress: 0.0.0.0:10249
metricsService:
  enabled: true
extraArgs: [--service-traffic-metrics]
VALUES
export HELM_EXTRA_VALUES="$values"

finish() {
  local rc=$?
  if [ "${KEEP:-}" = 1 ]; then echo "monitoring: cluster left up (KEEP=1)" >&2
  else
    "$cluster" down || rc=1
    "$cluster" leftovers "$absent" >&2 || { echo "monitoring: teardown left the above behind" >&2; rc=1; }
  fi
  rm -f "$absent" "$values"
  echo "monitoring: ${MODE} mode ($FAMILY), $((SECONDS - t0))s in all, exit $rc" >&2
  exit "$rc"
}
trap finish EXIT

"$cluster" up
eval "$("$cluster" env)"
kubectl="$(dirname "$("$root/hack/build-tools.sh" kubectl | tail -n1)/kubectl")/kubectl"
SMOKE_MODE="$MODE" SMOKE_FAMILY="$FAMILY" SMOKE_KUBECONFIG="$KUBECONFIG" SMOKE_KUBECTL="$kubectl" \
  MON_CP_NETNS=syk-cp MON_PNG="${MON_PNG:-$root/docs/img/dashboard.png}" \
  go -C "$root" test -tags node -count=1 -timeout 20m -v -run '^TestNodeMonitoring$' ./e2e/node/ |
  grep -v '^=== RUN'
