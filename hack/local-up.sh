#!/usr/bin/env bash
# local-up.sh: a throwaway Kubernetes control plane (etcd + kube-apiserver) on
# 127.0.0.1 only, for switchyard's e2e tests and local demos. No controller
# manager, scheduler or kubelet: Services are selector-less and tests write
# EndpointSlices themselves.
#
# Usage: hack/local-up.sh up     start etcd + kube-apiserver, wait for /readyz,
#                                write $RUN_DIR/admin.kubeconfig
#        hack/local-up.sh down   stop the processes recorded in $RUN_DIR/*.pid
#        hack/local-up.sh env    print shell exports for this RUN_DIR
#
# Environment (all optional):
#   RUN_DIR / SWITCHYARD_RUN  state directory (default /tmp/switchyard-run)
#   TOOLS_BIN                 dir holding etcd + kube-apiserver (default: the
#                             hack/build-tools.sh cache; built there if missing)
#   APISERVER_PORT (6443)  ETCD_PORT (2379)  ETCD_PEER_PORT (2380)
#   SERVICE_CIDR (10.96.0.0/16)  ADMIN_TOKEN  AUTHZ (RBAC)
#   READY_TIMEOUT (60, seconds)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
RUN_DIR="${RUN_DIR:-${SWITCHYARD_RUN:-/tmp/switchyard-run}}"
APISERVER_PORT="${APISERVER_PORT:-6443}"
ETCD_PORT="${ETCD_PORT:-2379}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-2380}"
SERVICE_CIDR="${SERVICE_CIDR:-10.96.0.0/16}"
ADMIN_TOKEN="${ADMIN_TOKEN:-switchyard-admin-token}"
AUTHZ="${AUTHZ:-RBAC}"
READY_TIMEOUT="${READY_TIMEOUT:-60}"
kubeconfig="$RUN_DIR/admin.kubeconfig"

log() { echo "local-up: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2fs", b-a}'; }

tools_bin() {
  if [ -n "${TOOLS_BIN:-}" ]; then echo "$TOOLS_BIN"; return; fi
  "$root/hack/build-tools.sh" kube-apiserver etcd | tail -n1
}

# starttime PID: the process start time (jiffies since boot) from
# /proc/PID/stat; with the PID it identifies one process, even after PID reuse.
starttime() {
  sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20
}

# alive NAME: the process recorded for NAME is still running.
alive() {
  local pidf="$RUN_DIR/$1.pid" pid st
  [ -f "$pidf" ] || return 1
  read -r pid st <"$pidf"
  [ -n "$st" ] && [ "$(starttime "$pid")" = "$st" ]
}

# stop NAME: SIGTERM the recorded PID (only if it is still the process we
# started), then SIGKILL after 10s.
stop() {
  local pid
  if alive "$1"; then
    read -r pid _ <"$RUN_DIR/$1.pid"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do alive "$1" || break; sleep 0.1; done
    if alive "$1"; then log "$1 ($pid) ignored SIGTERM, killing"; kill -KILL "$pid" 2>/dev/null || true; fi
    log "stopped $1 (pid $pid)"
  fi
  rm -f "$RUN_DIR/$1.pid"
}

down() {
  local t0; t0="$(now)"
  [ -f "$RUN_DIR/kube-apiserver.pid" ] || [ -f "$RUN_DIR/etcd.pid" ] || return 0
  stop kube-apiserver
  stop etcd
  log "down in $(elapsed "$t0")"
}

port_free() {
  ! ss -Hltn "sport = :$1" | grep -q .
}

# start NAME BIN ARGS...: run BIN in the background, logging to RUN_DIR, and
# record "PID starttime" so `down` never signals a recycled PID.
start() {
  local name="$1" bin="$2" pid; shift 2
  "$bin" "$@" </dev/null >"$RUN_DIR/$name.log" 2>&1 &
  pid=$!
  echo "$pid $(starttime "$pid")" >"$RUN_DIR/$name.pid"
  log "started $name (pid $pid, log $RUN_DIR/$name.log)"
}

credentials() {
  mkdir -p "$RUN_DIR/pki"
  if [ ! -f "$RUN_DIR/pki/sa.key" ]; then
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$RUN_DIR/pki/sa.key" 2>/dev/null
    openssl pkey -in "$RUN_DIR/pki/sa.key" -pubout -out "$RUN_DIR/pki/sa.pub" 2>/dev/null
  fi
  # token,user,uid,"groups"
  printf '%s,admin,admin,"system:masters"\n' "$ADMIN_TOKEN" >"$RUN_DIR/tokens.csv"
  chmod 600 "$RUN_DIR/tokens.csv" "$RUN_DIR/pki/sa.key"
}

# The control plane is throwaway: etcd does not fsync (creating the 88k
# objects of the 44k-Service scale test waited on the disk).
start_etcd() {
  local url="http://127.0.0.1:$ETCD_PORT" peer="http://127.0.0.1:$ETCD_PEER_PORT"
  start etcd "$1/etcd" --name local --data-dir "$RUN_DIR/etcd" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "local=$peer" --unsafe-no-fsync
}

# The endpoint reconciler refuses a loopback advertise address, so it is off:
# default/kubernetes exists but has no endpoints. --allow-privileged lets the
# (privileged) switchyard DaemonSet from deploy/ be created.
start_apiserver() {
  start kube-apiserver "$1/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --cert-dir="$RUN_DIR/pki" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$RUN_DIR/pki/sa.pub" \
    --service-account-signing-key-file="$RUN_DIR/pki/sa.key" \
    --token-auth-file="$RUN_DIR/tokens.csv" \
    --authorization-mode="$AUTHZ" \
    --allow-privileged=true
}

wait_ready() {
  local deadline=$(( $(date +%s) + READY_TIMEOUT ))
  until curl -sfk --max-time 1 -H "Authorization: Bearer $ADMIN_TOKEN" \
      "https://127.0.0.1:$APISERVER_PORT/readyz" 2>/dev/null | grep -qx ok; do
    for p in etcd kube-apiserver; do
      if ! alive "$p"; then log "$p exited; last log lines:"; tail -n 20 "$RUN_DIR/$p.log" >&2; return 1; fi
    done
    if [ "$(date +%s)" -ge "$deadline" ]; then log "no /readyz after ${READY_TIMEOUT}s"; return 1; fi
    sleep 0.1
  done
}

write_kubeconfig() {
  cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $RUN_DIR/pki/apiserver.crt
users:
- name: admin
  user:
    token: $ADMIN_TOKEN
contexts:
- name: local
  context: {cluster: local, user: admin, namespace: default}
current-context: local
EOF
  chmod 600 "$kubeconfig"
}

print_env() {
  echo "export SWITCHYARD_RUN=$RUN_DIR"
  echo "export KUBECONFIG=$kubeconfig"
  echo "export SWITCHYARD_KUBECONFIG=$kubeconfig"
}

up() {
  local t0 bin; t0="$(now)"
  mkdir -p "$RUN_DIR"
  if alive kube-apiserver && alive etcd; then log "already running in $RUN_DIR"; print_env; return; fi
  down
  for p in "$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT"; do
    port_free "$p" || { log "port $p on 127.0.0.1 is in use; set APISERVER_PORT/ETCD_PORT/ETCD_PEER_PORT"; return 1; }
  done
  bin="$(tools_bin)"
  credentials
  start_etcd "$bin"
  start_apiserver "$bin"
  wait_ready || { down; return 1; }
  write_kubeconfig
  log "ready in $(elapsed "$t0") (apiserver https://127.0.0.1:$APISERVER_PORT)"
  print_env
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) print_env ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
