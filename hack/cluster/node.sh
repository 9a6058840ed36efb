# node.sh: one kubelet node = containerd + kubelet in the node's network
# namespace and a mount namespace of its own (sourced by cluster.sh).
#
# The mount namespace (propagation: slave) holds per-node directories bound
# over the fixed paths kubelet, containerd and CNI use (/var/lib/kubelet,
# /var/log/pods, /var/log/containers, /var/lib/cni, /run/containerd,
# /opt/containerd, /run/xtables.lock), so two nodes never share them and
# nothing they mount (the kubelet's root dir, pod volumes) shows on the host;
# it all goes when the namespace does. cgroups are global: each node gets its
# own cgroupRoot (/$PREFIX-nodeN) in every v1 hierarchy, removed at teardown.

# The fixed paths a node gets its own copy of. A trailing ":file" binds a file.
# /etc/resolv.conf is an empty file: containerd never asks the host's
# resolvers (an image that is not imported fails at once; nothing is pulled).
NODE_BINDS=(/var/lib/kubelet /var/log/pods /var/log/containers /var/lib/cni
  /run/containerd /opt/containerd /run/xtables.lock:file /etc/resolv.conf:file)

# host_mountpoint PATH KIND: make sure PATH exists on the host as a bind
# target; remember what was created so teardown removes it again.
host_mountpoint() {
  local p="$1" kind="$2" d
  [ -e "$p" ] && return 0
  d="$p"
  while [ ! -e "$(dirname "$d")" ]; do d="$(dirname "$d")"; done
  echo "$d" >>"$D/created-host-paths"
  if [ "$kind" = file ]; then mkdir -p "$(dirname "$p")"; touch "$p"; else mkdir -p "$p"; fi
}

mntns_up() {
  local n="$1" nd="$D/node$1" b p kind src script=""
  mkdir -p "$D/ns"
  if ! mountpoint -q "$D/ns"; then
    mount --bind "$D/ns" "$D/ns"
    mount --make-private "$D/ns"
  fi
  touch "$D/ns/mnt-node$n"
  for b in "${NODE_BINDS[@]}"; do
    p="${b%%:*}"; kind=dir; [ "$b" = "$p" ] || kind=file
    src="$nd/root$p"
    host_mountpoint "$p" "$kind"
    if [ "$kind" = file ]; then mkdir -p "$(dirname "$src")"; touch "$src"; else mkdir -p "$src"; fi
    script+="mount --bind '$src' '$p' && "
  done
  unshare --mount="$D/ns/mnt-node$n" --propagation slave sh -c "${script}true"
}

mntns_down() {
  local f
  for f in "$D"/ns/mnt-node*; do
    [ -e "$f" ] || continue
    umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
    rm -f "$f"
  done
  if mountpoint -q "$D/ns" 2>/dev/null; then umount "$D/ns" || umount -l "$D/ns"; fi
}

cgroup_hierarchies() { ls -d /sys/fs/cgroup/*/ | xargs -n1 basename; }

cgroup_up() {
  local root="/$(node_name "$1")" h
  for h in $(cgroup_hierarchies); do
    mkdir -p "/sys/fs/cgroup/$h$root"
  done
  cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset$root/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset$root/cpuset.mems"
}

# cgroup_pids N: every process in node N's cgroup root (pids hierarchy).
cgroup_pids() {
  local dir="/sys/fs/cgroup/pids/$(node_name "$1")"
  [ -d "$dir" ] || return 0
  find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -un
}

cgroup_down() {
  local root="/$(node_name "$1")" h
  for h in $(cgroup_hierarchies); do
    [ -d "/sys/fs/cgroup/$h$root" ] || continue
    find "/sys/fs/cgroup/$h$root" -depth -type d -exec rmdir {} \; 2>/dev/null ||
      log "cgroup $h$root not fully removed"
  done
}

containerd_config() {
  local n="$1" nd="$D/node$1"
  mkdir -p "$nd/cni"
  cat >"$nd/containerd.toml" <<EOF
version = 3
root = "$nd/containerd/root"
state = "$nd/containerd/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "$nd/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/opt"

[plugins."io.containerd.cri.v1.images"]
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins."io.containerd.cri.v1.runtime"]
  # CAP_SYS_RESOURCE is missing here: runc cannot set a negative oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$nd/cni"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
      BinaryName = "$BIN_RUNC/runc"
      SystemdCgroup = false
EOF
  cat >"$nd/cni/10-switchyard-local.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "switchyard-local",
  "plugins": [
    {"type": "bridge", "bridge": "cbr0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [$(cni_ranges "$n")],
              "routes": [$(cni_routes)]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

# cni_ranges N / cni_routes: host-local's ranges (one per family, primary
# first) and the pods' default routes (the bridge is their gateway).
cni_ranges() {
  local f out=""
  for f in $(families); do out+="${out:+, }[{\"subnet\": \"$(pod_cidr "$1" "$f")\"}]"; done
  echo "$out"
}
cni_routes() {
  local f out=""
  for f in $(families); do
    case "$f" in 4) out+="${out:+, }{\"dst\": \"0.0.0.0/0\"}" ;; 6) out+="${out:+, }{\"dst\": \"::/0\"}" ;; esac
  done
  echo "$out"
}

kubelet_config() {
  local n="$1" nd="$D/node$1"
  cat >"$nd/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 (hybrid) and PID 1 is not systemd on this machine.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$(node_name "$n")
# CAP_SYS_RESOURCE is missing: no negative oom_score_adj.
oomScoreAdj: 0
failSwapOn: false
containerRuntimeEndpoint: unix://$nd/containerd.sock
localStorageCapacityIsolation: true
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $D/pki/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [$DNS_IP]
clusterDomain: cluster.local
# Pods never inherit the host's resolvers: no query leaves the cluster.
resolvConf: ""
readOnlyPort: 0
serializeImagePulls: false
# The images were imported, not pulled: they cannot come back once collected.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
EOF
}

node_up() {
  local n="$1" nd="$D/node$1" img
  mkdir -p "$nd"
  mntns_up "$n"
  cgroup_up "$n"
  containerd_config "$n"
  kubelet_config "$n"
  kubeconfig "$nd/kubelet.kubeconfig" "system:node:$(node_name "$n")" "$APISERVER"
  # BinaryName covers CRI pods only; the shim and runc are also looked up in PATH.
  start "containerd-node$n" env PATH="$BIN_CONTAINERD:$BIN_RUNC:$PATH" \
    nsenter --net="/run/netns/$(node_name "$n")" --mount="$D/ns/mnt-node$n" -- \
    "$BIN_CONTAINERD/containerd" --config "$nd/containerd.toml"
  wait_for "containerd on node $n" 30 "$BIN_CONTAINERD/ctr" -a "$nd/containerd.sock" version
  for img in "${NODE_IMAGES[@]}"; do
    "$BIN_CONTAINERD/ctr" -a "$nd/containerd.sock" -n k8s.io images import "$img" >>"$D/logs/import-node$n.log" 2>&1 ||
      die "import of $img into node $n failed: $(tail -n3 "$D/logs/import-node$n.log")"
  done
  start "kubelet-node$n" nsenter --net="/run/netns/$(node_name "$n")" --mount="$D/ns/mnt-node$n" -- \
    "$BIN_K8S/kubelet" --config "$nd/kubelet.yaml" \
    --kubeconfig "$nd/kubelet.kubeconfig" --hostname-override "$(node_name "$n")" \
    --node-ip "$(node_ips "$n")" -v=2
}

# node_procs N: PIDs started for node N that outlive containerd (the shims,
# whose command line names the node's containerd socket, and everything in
# the node's cgroups).
node_procs() {
  pgrep -f -- "-address $D/node$1/containerd.sock" || true
  cgroup_pids "$1"
}

node_down() {
  local n="$1" pids
  stop "kubelet-node$n" 15
  stop "containerd-node$n" 15
  pids="$(node_procs "$n" | sort -un | tr '\n' ' ')"
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  sleep 0.5
  cgroup_down "$n"
}
