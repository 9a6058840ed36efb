# lib.sh: shared helpers of hack/cluster (sourced, not run).
#
# Every process the cluster starts is recorded as "PID STARTTIME" in
# $D/pids/NAME.pid; stop signals it only while /proc still shows that start
# time, so a recycled PID is never signalled.

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# starttime PID: the process start time (jiffies since boot) from /proc.
starttime() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

alive() {
  local pidf="$D/pids/$1.pid" pid st
  [ -f "$pidf" ] || return 1
  read -r pid st <"$pidf"
  [ -n "$st" ] && [ "$(starttime "$pid")" = "$st" ]
}

pid_of() { local pid; read -r pid _ <"$D/pids/$1.pid"; echo "$pid"; }

# start NAME CMD...: run CMD in the background, logging to $D/logs/NAME.log.
start() {
  local name="$1" pid; shift
  mkdir -p "$D/pids" "$D/logs"
  "$@" </dev/null >>"$D/logs/$name.log" 2>&1 &
  pid=$!
  echo "$pid $(starttime "$pid")" >"$D/pids/$name.pid"
  log "started $name (pid $pid)"
}

# stop NAME [GRACE]: SIGTERM, then SIGKILL after GRACE seconds (default 10).
stop() {
  local name="$1" grace="${2:-10}" pid i
  if alive "$name"; then
    pid="$(pid_of "$name")"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < grace * 10; i++)); do alive "$name" || break; sleep 0.1; done
    if alive "$name"; then log "$name ($pid) ignored SIGTERM, killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$D/pids/$name.pid"
}

# wait_for DESC TIMEOUT CMD...: retry CMD every 0.5 s until it succeeds.
wait_for() {
  local desc="$1" timeout="$2" deadline; shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || { log "timed out after ${timeout}s waiting for $desc"; return 1; }
    sleep 0.5
  done
}

kc() { "$BIN_K8S/kubectl" --kubeconfig "$D/admin.kubeconfig" "$@"; }
