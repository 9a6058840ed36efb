#!/bin/bash
# nftwalk: what one small iptables-nft change costs at 10k services x 10
# endpoints, per nat-table layout (A = kube-proxy's, the one switchyard
# writes; B-H variants without some chains, rules or base-chain jumps).
# On commit the kernel revalidates every rule reachable from each base
# chain once a transaction adds a rule with a target or an xt match; this
# experiment shows how that walk, not the payload, sets the floor of a
# one-endpoint change. Layouts are described in gen.py.
#
# Usage (root): hack/bench/nftwalk/run.sh [ROUNDS]   (default 5)
# Env: WALK_LAYOUTS (default ABCDEF; also G H), WALK_NSVC (default 10000),
#      WALK_OUT (results directory, default a new temporary one),
#      PERF=1 to record `perf -g` around one change per layout (ADF).
# Every table lives in a network namespace sywalk-PID-LAYOUT created here
# and deleted on exit; the host's rules are never touched.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-5}
out=${WALK_OUT:-$(mktemp -d -t switchyard-nftwalk.XXXXXX)}
mkdir -p "$out"
P=sywalk-$$
layouts=$(echo "${WALK_LAYOUTS:-ABCDEF}" | grep -o .)
cleanup() {
  for l in $layouts; do ip netns del "$P-$l" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM
for l in $layouts; do ip netns add "$P-$l"; done
echo "kernel $(uname -r); $(iptables -V); load $(cut -d' ' -f1-3 /proc/loadavg); results in $out"
PYTHONPATH=$here python3 "$here/walk.py" "$P" "$rounds" "$out/results.jsonl" >"$out/walk.log"
PYTHONPATH=$here python3 "$here/analyze.py" "$out/results.jsonl" | tee "$out/summary.md"
if [ "${PERF:-0}" = 1 ]; then "$here/perf.sh" "$P" "$out"; fi
