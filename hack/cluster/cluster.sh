#!/usr/bin/env bash
# cluster.sh: a real Kubernetes cluster on this machine, with switchyard
# deployed from deploy/ the way an operator deploys it.
#
#   hack/cluster/cluster.sh up     build (or take from cache) every binary and
#                                  image, start the cluster, `kubectl apply -k`
#                                  switchyard in $MODE, then CoreDNS; the last
#                                  line is `export KUBECONFIG=...`
#   hack/cluster/cluster.sh down   stop everything, delete the namespaces,
#                                  cgroups and mounts, put the sysctls back
#   hack/cluster/cluster.sh env    print the exports of a running cluster
#   hack/cluster/cluster.sh import TAR...
#                                  import image archives into every node
#   hack/cluster/cluster.sh absent-paths > FILE   (before up)
#   hack/cluster/cluster.sh leftovers [FILE]
#                                  after down: list (and fail on) anything
#                                  of the cluster still on the host
#
# Inside (see net.sh, node.sh): etcd, kube-apiserver, kube-controller-manager
# and kube-scheduler in the network namespace $PREFIX-cp; $NODES nodes, each
# containerd 2.x + runc + kubelet in namespace $PREFIX-nodeN with its own
# mount namespace and cgroup root; CNI bridge + host-local + portmap +
# loopback (Debian's plugins) with hairpin on; CoreDNS. All Kubernetes
# binaries are v1.37.1 from hack/tools. The host only gets a forwarder on
# 127.0.0.1:$APISERVER_HOST_PORT to the apiserver.
#
# Environment: MODE (iptables|nftables|userspace|ipvs; default iptables),
# FAMILY (ipv4, ipv6 or dual: the cluster's address families, see net.sh;
# default ipv4),
# PROXY (switchyard, or kube-proxy: upstream v1.37.1 as kubeadm deploys it,
# for side-by-side runs; it has no userspace mode),
# NODES (2), CLUSTER_DIR (/tmp/switchyard-cluster), APISERVER_HOST_PORT
# (16443), VERSION (switchyard's image tag; default git describe),
# CONFORMANCE_IMAGES=1 (also the other images upstream's sig-network tests use),
# INIT_ONLY=1 (apply deploy/ with the split-privilege patch of
# deploy/init-only/), DEPLOY (kustomize: `kubectl apply -k` of deploy/, the
# default; helm: `helm install` of deploy/helm/switchyard, with the values
# file HELM_EXTRA_VALUES on top when set).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/hack/cluster"
D="${CLUSTER_DIR:-/tmp/switchyard-cluster}"
PREFIX=syk
NODES="${NODES:-2}"
MODE="${MODE:-iptables}"
PROXY="${PROXY:-switchyard}"
FAMILY="${FAMILY:-ipv4}"
# IPv4 and IPv6 (ULA) addresses; FAMILY picks which the cluster uses.
NODE_NET=172.29.0
NODE_NET6=fd00:29
CP_IP4=172.29.0.1
CP_IP6=fd00:29::1
SERVICE_CIDR4=10.96.0.0/16
SERVICE_CIDR6=fd00:10:96::/112
CLUSTER_CIDR4=10.244.0.0/16
CLUSTER_CIDR6=fd00:10:244::/56
KUBERNETES_SVC_IP4=10.96.0.1
KUBERNETES_SVC_IP6=fd00:10:96::1
DNS_IP4=10.96.0.10
DNS_IP6=fd00:10:96::a
APISERVER_HOST_PORT="${APISERVER_HOST_PORT:-16443}"
VERSION="${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}"
# Global sysctls the kubelet sets (setupKernelTunables); put back at teardown.
KUBELET_SYSCTLS=(vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes)

# shellcheck source=hack/cluster/lib.sh
. "$here/lib.sh"
# shellcheck source=hack/cluster/pki.sh
. "$here/pki.sh"
# shellcheck source=hack/cluster/net.sh
. "$here/net.sh"
# shellcheck source=hack/cluster/node.sh
. "$here/node.sh"

case "$FAMILY" in ipv4|ipv6|dual) ;; *) die "FAMILY=$FAMILY: want ipv4, ipv6 or dual" ;; esac
# by_family V4 V6: the value (or values, comma-separated, primary first) of
# the cluster's families.
by_family() { case "$FAMILY" in ipv4) echo "$1" ;; ipv6) echo "$2" ;; dual) echo "$1,$2" ;; esac; }
CP_IP="$(cp_ip)"
APISERVER="https://$(hostport "$CP_IP" 6443)"
SERVICE_CIDR="$(by_family "$SERVICE_CIDR4" "$SERVICE_CIDR6")"
CLUSTER_CIDR="$(by_family "$CLUSTER_CIDR4" "$CLUSTER_CIDR6")"
KUBERNETES_SVC_IPS="$(by_family "$KUBERNETES_SVC_IP4" "$KUBERNETES_SVC_IP6")"
DNS_IPS="$(by_family "$DNS_IP4" "$DNS_IP6")"
# The kubernetes Service and cluster DNS (as pods' resolv.conf names it) have
# the primary family's address.
DNS_IP="${DNS_IPS%%,*}"

tools() {
  local line
  while IFS= read -r line; do
    case "$line" in
      kubelet=*) BIN_K8S="$(dirname "${line#*=}")" ;;
      containerd=*) BIN_CONTAINERD="$(dirname "${line#*=}")" ;;
      runc=*) BIN_RUNC="$(dirname "${line#*=}")" ;;
    esac
  done < <("$root/hack/build-tools.sh" kube-apiserver kubectl etcd kubelet kube-controller-manager \
    kube-scheduler agnhost containerd containerd-shim-runc-v2 ctr runc coredns)
  mkdir -p "$D/bin"
  (cd "$root" && go build -o "$D/bin/nsforward" ./hack/nsforward)
}

# The nodes are this machine: switchyard's image index needs only its
# architecture (no emulated arm64 rootfs build for a cluster run).
images() {
  local line
  NODE_IMAGES=()
  while IFS= read -r line; do
    NODE_IMAGES+=("${line#*=}")
    case "$line" in
      pause=*) PAUSE_IMAGE="registry.k8s.io/pause:$(basename "${line#*=}" | cut -d- -f2)" ;;
      coredns=*) COREDNS_IMAGE="registry.k8s.io/coredns/coredns:$(basename "${line#*=}" | cut -d- -f2)" ;;
    esac
  done < <(VERSION="$VERSION" IMAGE_ARCHES="${IMAGE_ARCHES:-$(dpkg --print-architecture)}" \
    "$root/hack/image/build.sh" pause busybox agnhost coredns \
    "$([ "$PROXY" = kube-proxy ] && echo kube-proxy || echo switchyard)" \
    ${CONFORMANCE_IMAGES:+glibc-dns-testing nginx regression-issue-74839 distroless-iptables})
}

sysctls_save() {
  [ -f "$D/sysctl.saved" ] && return 0
  local k
  for k in "${KUBELET_SYSCTLS[@]}"; do echo "$k=$(sysctl -n "$k")"; done >"$D/sysctl.saved"
}

sysctls_restore() {
  [ -f "$D/sysctl.saved" ] || return 0
  local kv
  while IFS= read -r kv; do
    [ "$(sysctl -n "${kv%%=*}")" = "${kv#*=}" ] || { sysctl -qw "$kv" && log "restored $kv"; }
  done <"$D/sysctl.saved"
  rm -f "$D/sysctl.saved"
}

control_plane_up() {
  local cp="/run/netns/$PREFIX-cp" p="$D/pki"
  kubeconfig "$D/kcm.kubeconfig" system:kube-controller-manager "$APISERVER"
  kubeconfig "$D/scheduler.kubeconfig" system:kube-scheduler "$APISERVER"
  start etcd nsenter --net="$cp" -- "$BIN_K8S/etcd" --name local --data-dir "$D/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster local=http://127.0.0.1:2380 --unsafe-no-fsync
  start kube-apiserver nsenter --net="$cp" -- "$BIN_K8S/kube-apiserver" \
    --etcd-servers=http://127.0.0.1:2379 --bind-address="$([ "$FAMILY" = ipv4 ] && echo 0.0.0.0 || echo ::)" --secure-port=6443 \
    --advertise-address="$CP_IP" --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
    --client-ca-file="$p/ca.crt" --service-cluster-ip-range="$SERVICE_CIDR" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --token-auth-file="$p/tokens.csv" --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --kubelet-client-certificate="$p/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$p/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP
  start nsforward "$D/bin/nsforward" -reverse -netns "$cp" \
    -listen "127.0.0.1:$APISERVER_HOST_PORT" -target "$(hostport "$CP_IP" 6443)"
  wait_for "kube-apiserver /readyz" 120 kc get --raw /readyz
  start kube-controller-manager nsenter --net="$cp" -- "$BIN_K8S/kube-controller-manager" \
    --kubeconfig="$D/kcm.kubeconfig" --authentication-kubeconfig="$D/kcm.kubeconfig" \
    --authorization-kubeconfig="$D/kcm.kubeconfig" --bind-address=127.0.0.1 \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false --cluster-name=switchyard-local
  start kube-scheduler nsenter --net="$cp" -- "$BIN_K8S/kube-scheduler" \
    --kubeconfig="$D/scheduler.kubeconfig" --authentication-kubeconfig="$D/scheduler.kubeconfig" \
    --authorization-kubeconfig="$D/scheduler.kubeconfig" --bind-address=127.0.0.1 --leader-elect=false
}

nodes_up() {
  local n
  for n in $(seq "$NODES"); do node_up "$n"; done
  for n in $(seq "$NODES"); do
    wait_for "node $(node_name "$n") to register" 120 kc get node "$(node_name "$n")"
    # No node IPAM controller: each node's pod CIDRs are fixed, as its CNI
    # config says (one per family, primary first).
    kc patch node "$(node_name "$n")" --type merge \
      -p "{\"spec\":{\"podCIDR\":\"$(pod_cidr "$n")\",\"podCIDRs\":[\"$(pod_cidrs "$n" | sed 's/,/","/')\"]}}" >/dev/null
  done
  kc wait --for=condition=Ready node --all --timeout=180s >/dev/null
}

# deploy_switchyard: `kubectl apply -k` of an overlay that takes deploy/ as it
# is and changes what an operator changes: the image tag, the mode in the
# ConfigMap, and conntrack.maxPerCore 0 (as kind sets it, and as this
# cluster's kube-proxy gets it: nf_conntrack_max and the hash size are
# machine-wide and nothing here may change the host; the TCP timeouts are
# per network namespace and keep kube-proxy's defaults).
deploy_switchyard() {
  local ov="$D/overlay"
  mkdir -p "$ov"
  cat >"$ov/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- $(realpath --relative-to="$ov" "$root/deploy")
images:
- name: localhost/switchyard
  newTag: "$VERSION"
EOF
  sed -E -e "s/^(    mode: )[a-z]+.*/\1$MODE/" -e 's/^(    mode: .*)$/\1\n    conntrack:\n      maxPerCore: 0/' \
    "$root/deploy/configmap.yaml" >"$ov/configmap-node.yaml"
  grep -q "^    mode: $MODE\$" "$ov/configmap-node.yaml" || die "could not set mode $MODE in the ConfigMap"
  grep -q "^      maxPerCore: 0\$" "$ov/configmap-node.yaml" || die "could not set conntrack.maxPerCore in the ConfigMap"
  # The pod CIDRs of the cluster's families (dual: both, as kube-proxy takes them).
  sed -i -E "s|^(    clusterCIDR: ).*|\1$CLUSTER_CIDR|" "$ov/configmap-node.yaml"
  grep -q "^    clusterCIDR: $CLUSTER_CIDR\$" "$ov/configmap-node.yaml" || die "could not set clusterCIDR in the ConfigMap"
  printf 'patches:\n- path: configmap-node.yaml\n' >>"$ov/kustomization.yaml"
  if [ "${INIT_ONLY:-}" = 1 ]; then
    cp "$root/deploy/init-only/daemonset-init-only.yaml" "$ov/"
    printf -- '- path: daemonset-init-only.yaml\n' >>"$ov/kustomization.yaml"
  fi
  apiserver_endpoint
  kc apply -k "$ov" >/dev/null
  kc -n kube-system rollout status ds/switchyard --timeout=180s >&2
}

# apiserver_endpoint: where the apiserver is, as an operator tells
# switchyard on a cluster without kube-proxy (see deploy/daemonset.yaml).
apiserver_endpoint() {
  kc -n kube-system create configmap kubernetes-services-endpoint \
    --from-literal=KUBERNETES_SERVICE_HOST="$CP_IP" --from-literal=KUBERNETES_SERVICE_PORT=6443 \
    --dry-run=client -o yaml | kc apply -f - >/dev/null
}

# deploy_switchyard_helm: `helm install` of the chart with what an operator
# sets (the same settings as the kustomize overlay above), from a values
# file (a dual-stack clusterCIDR holds a comma, which --set would split).
deploy_switchyard_helm() {
  cat >"$D/helm-values.yaml" <<EOF
image:
  tag: "$VERSION"
mode: $MODE
clusterCIDR: "$CLUSTER_CIDR"
conntrack:
  maxPerCore: 0
initOnly: $([ "${INIT_ONLY:-}" = 1 ] && echo true || echo false)
EOF
  apiserver_endpoint
  "$(helm_bin)" --kubeconfig "$D/admin.kubeconfig" upgrade --install switchyard "$root/deploy/helm/switchyard" \
    --namespace kube-system -f "$D/helm-values.yaml" ${HELM_EXTRA_VALUES:+-f "$HELM_EXTRA_VALUES"} --wait --timeout 180s >&2
  kc -n kube-system rollout status ds/switchyard --timeout=180s >&2
}

helm_bin() { echo "$("$root/hack/build-tools.sh" helm | tail -n1)/helm"; }

# deploy_kube_proxy: upstream kube-proxy in MODE, configured as kubeadm does
# (its kubeconfig names the apiserver's own address).
deploy_kube_proxy() {
  local v; v="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$root/hack/tools/go.mod")"
  sed -e "s|__IMAGE__|localhost/kube-proxy:$v|" -e "s|__MODE__|$MODE|" \
    -e "s|__SERVER__|$APISERVER|" -e "s|__CLUSTER_CIDR__|$CLUSTER_CIDR|" \
    "$here/manifests/kube-proxy.yaml" | kc apply -f - >/dev/null
  kc -n kube-system rollout status ds/kube-proxy --timeout=180s >&2
}

deploy_coredns() {
  # Dual-stack: the DNS Service gets both families' addresses (RequireDualStack).
  sed -e "s|__COREDNS_IMAGE__|$COREDNS_IMAGE|" -e "s|__DNS_IP__|$DNS_IP|" -e "s|__DNS_IPS__|${DNS_IPS//,/\", \"}|" \
    -e "s|__DNS_FAMILY_POLICY__|$([ "$FAMILY" = dual ] && echo RequireDualStack || echo SingleStack)|" \
    "$here/manifests/coredns.yaml" |
    kc apply -f - >/dev/null
  kc -n kube-system rollout status deploy/coredns --timeout=180s >&2
}

print_env() {
  echo "export CLUSTER_DIR=$D"
  echo "export KUBECONFIG=$D/admin.kubeconfig"
}

preflight() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, cgroups, mounts)"
  case "$MODE" in iptables|nftables|userspace|ipvs) ;; *) die "MODE=$MODE: want iptables, nftables, userspace or ipvs" ;; esac
  case "$PROXY" in switchyard|kube-proxy) ;; *) die "PROXY=$PROXY: want switchyard or kube-proxy" ;; esac
  [ "$PROXY:$MODE" != kube-proxy:userspace ] || die "kube-proxy has no userspace mode (removed upstream in v1.26)"
  [ "$MODE" != ipvs ] || log "warning: this kernel has no IP_VS; ipvs mode will not become Ready here"
  ss -Hltn "sport = :$APISERVER_HOST_PORT" | grep -q . && die "127.0.0.1:$APISERVER_HOST_PORT is in use (APISERVER_HOST_PORT)"
  ! ip netns list | grep -qE "^$PREFIX-" || die "namespaces $PREFIX-* exist: run '$0 down' first"
  "$root/hack/install-deps.sh"
}

up() {
  local t0=$SECONDS
  if alive kube-apiserver 2>/dev/null; then log "already up in $D"; print_env; return; fi
  preflight
  mkdir -p "$D"
  tools
  images
  log "binaries and images ready after $((SECONDS - t0))s"
  trap 'rc=$?; [ "$rc" = 0 ] || log "up failed; logs in $D/logs; run: $0 down"' EXIT
  sysctls_save
  pki
  kubeconfig "$D/admin.kubeconfig" admin "https://127.0.0.1:$APISERVER_HOST_PORT"
  kubeconfig "$D/admin-internal.kubeconfig" admin "$APISERVER"
  net_up
  control_plane_up
  nodes_up
  log "$NODES nodes Ready after $((SECONDS - t0))s"
  if [ "$PROXY" = kube-proxy ]; then deploy_kube_proxy
  elif [ "${DEPLOY:-kustomize}" = helm ]; then deploy_switchyard_helm
  else deploy_switchyard; fi
  deploy_coredns
  log "up in $((SECONDS - t0))s: $NODES nodes ($FAMILY), $PROXY $([ "$PROXY" = kube-proxy ] || echo "$VERSION ")in $MODE mode (logs: $D/logs)"
  print_env
}

remove_created_host_paths() {
  [ -f "$D/created-host-paths" ] || return 0
  local p
  sort -ru "$D/created-host-paths" | while IFS= read -r p; do
    if [ -f "$p" ] && [ ! -s "$p" ]; then rm -f "$p"; elif [ -d "$p" ]; then rmdir "$p" 2>/dev/null || log "left non-empty $p"; fi
  done
  rm -f "$D/created-host-paths"
}

down() {
  local t0=$SECONDS n
  [ -d "$D" ] || return 0
  stop nsforward 5
  for n in $(seq 9); do
    [ -d "$D/node$n" ] && node_down "$n"
  done
  stop kube-scheduler
  stop kube-controller-manager
  stop kube-apiserver
  stop etcd
  mntns_down
  net_down
  sysctls_restore
  remove_created_host_paths
  if findmnt -rn -o TARGET | grep -q "^$D"; then
    log "mounts under $D remain; not deleting it"
  else
    rm -rf "$D"
  fi
  log "down in $((SECONDS - t0))s"
}

# absent_paths: the fixed node paths that do not exist on the host now
# (`up` creates them as mount points; `down` must remove them again).
absent_paths() {
  local p
  for p in "${NODE_BINDS[@]}"; do p="${p%%:*}"; [ -e "$p" ] || echo "$p"; done
}

# leftovers [FILE]: everything `up` creates outside $D that `down` must
# remove, and the paths FILE lists (absent_paths before `up`); prints what
# remains and fails if anything does.
leftovers() {
  local found=0 p
  while IFS= read -r p; do echo "left over: netns $p"; found=1; done < <(ip netns list | awk '{print $1}' | grep -E "^$PREFIX-" || true)
  while IFS= read -r p; do echo "left over: cgroup $p"; found=1; done < <(ls -d /sys/fs/cgroup/*/"$PREFIX"-* 2>/dev/null || true)
  while IFS= read -r p; do echo "left over: mount $p"; found=1; done < <(findmnt -rn -o TARGET | grep -E "^$D(/|$)" || true)
  while IFS= read -r p; do echo "left over: process $p"; found=1; done < <(pgrep -a -f -- "$D/" || true)
  if [ -n "${1:-}" ]; then
    while IFS= read -r p; do [ -e "$p" ] && { echo "left over: $p"; found=1; }; done <"$1"
  fi
  [ ! -d "$D" ] || { echo "left over: $D"; found=1; }
  return "$found"
}

# import TAR...: load image archives into every node's containerd.
import_images() {
  local n img
  alive kube-apiserver || die "no cluster in $D"
  BIN_CONTAINERD="$(dirname "$("$root/hack/build-tools.sh" ctr | tail -n1)/ctr")"
  for n in $(seq 9); do
    [ -d "$D/node$n" ] || continue
    for img in "$@"; do
      "$BIN_CONTAINERD/ctr" -a "$D/node$n/containerd.sock" -n k8s.io images import "$img" \
        >>"$D/logs/import-node$n.log" 2>&1 || die "import of $img into node $n failed"
    done
  done
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) print_env ;;
  import) shift; import_images "$@" ;;
  absent-paths) absent_paths ;;
  leftovers) leftovers "${2:-}" ;;
  *) echo "usage: $0 up|down|env|import TAR...|absent-paths|leftovers [FILE]" >&2; exit 2 ;;
esac
