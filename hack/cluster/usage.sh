#!/usr/bin/env bash
# usage.sh [SECONDS]: the switchyard daemon's footprint on each node of the
# local cluster: resident memory now (VmRSS), its peak (VmHWM), and the CPU
# it used over SECONDS (default 30) of wall time, as a share of one core.
# The daemon is found as the process named switchyard inside the node's
# cgroup root (/sys/fs/cgroup/pids/syk-nodeN).
set -euo pipefail
secs="${1:-30}"
hz="$(getconf CLK_TCK)"

# daemons: "NODE PID" for every switchyard process of the cluster's nodes.
daemons() {
  local dir pid
  for dir in /sys/fs/cgroup/pids/syk-node*; do
    [ -d "$dir" ] || continue
    for pid in $(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un); do
      [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = switchyard ] && echo "$(basename "$dir") $pid"
    done
  done
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
kb() { awk -v k="$2:" '$1==k{print $2}' "/proc/$1/status"; }

mapfile -t list < <(daemons)
[ ${#list[@]} -gt 0 ] || { echo "usage: no switchyard process in any syk-node cgroup" >&2; exit 1; }
declare -A before
for entry in "${list[@]}"; do before[$entry]="$(cpu_ticks "${entry#* }")"; done
sleep "$secs"
for entry in "${list[@]}"; do
  pid="${entry#* }"
  ticks=$(( $(cpu_ticks "$pid") - ${before[$entry]} ))
  awk -v n="${entry% *}" -v p="$pid" -v rss="$(kb "$pid" VmRSS)" -v hwm="$(kb "$pid" VmHWM)" \
    -v t="$ticks" -v hz="$hz" -v s="$secs" \
    'BEGIN{printf "usage: %s pid %s: RSS %.1f MB, peak (VmHWM) %.1f MB, CPU %.2f%% of a core over %ss\n", n, p, rss/1024, hwm/1024, 100*t/hz/s, s}'
done
