#!/bin/bash
# perf record -g around one one-endpoint change per layout ($PERF_LAYOUTS,
# default ADF) in the namespaces of run.sh (prefix $1); writes
# perf-<layout>.txt (top kernel symbols) into directory $2.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
P=$1
out=$2
for l in $(echo "${PERF_LAYOUTS:-ADF}" | grep -o .); do
  PYTHONPATH=$here python3 -c "import gen,sys; sys.stdout.write(gen.change_payload('$l', 4242, 999))" >"$out/chg-$l.txt"
  perf record -q -F 10000 -g -o "$out/perf-$l.data" -- ip netns exec "$P-$l" iptables-nft-restore --noflush <"$out/chg-$l.txt" 2>/dev/null
  perf report -i "$out/perf-$l.data" --stdio -g none --no-children --sort sym 2>/dev/null |
    grep -E '^#.*Samples|^ +[0-9.]+%' | head -26 >"$out/perf-$l.txt" || true
  echo "== $l"
  cat "$out/perf-$l.txt"
done
