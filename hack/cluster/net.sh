# net.sh: the cluster's network, all of it inside namespaces this script
# creates (sourced by cluster.sh). Nothing is added to the host namespace.
#
# FAMILY picks the address families: ipv4 (172.29.0.0/24, pods 10.244.N.0/24,
# services 10.96.0.0/16), ipv6 (ULA only: fd00:29::/64, pods
# fd00:10:244:N::/64, services fd00:10:96::/112) or dual (both; IPv4 first,
# the primary family).
#
#   $PREFIX-cp     control plane; bridge $PREFIX-br0 with $CP_IP (and/or
#                  fd00:29::1) joins the nodes; routes every node's pod CIDRs
#                  to that node; no route leaves it, so no packet reaches any
#                  address outside.
#   $PREFIX-nodeN  node N: eth0 $NODE_NET.(10+N) and/or fd00:29::(10+N),
#                  default routes via the control plane; pods on the CNI
#                  bridge cbr0 in 10.244.N.0/24 and/or fd00:10:244:N::/64;
#                  routes to the other nodes' pod CIDRs via their node IPs.
#
# IPv6 addresses are added with nodad and duplicate address detection is off
# in the namespaces (accept_dad=0): an address works the moment it is added,
# as the kubelet, the apiserver and CNI expect.

# The families of FAMILY, primary first: "4", "6" or "4 6".
families() {
  case "$FAMILY" in
    ipv4) echo 4 ;;
    ipv6) echo 6 ;;
    dual) echo 4 6 ;;
  esac
}
primary_family() { families | cut -d' ' -f1; }
has_family() { families | grep -qw "$1"; }

node_name() { echo "$PREFIX-node$1"; }
# node_ip N [FAM]: node N's address in FAM (default: the primary family).
node_ip() {
  case "${2:-$(primary_family)}" in
    4) echo "$NODE_NET.$((10 + $1))" ;;
    6) echo "$NODE_NET6::$((10 + $1))" ;;
  esac
}
# pod_cidr N [FAM]: node N's pod CIDR in FAM (default: the primary family).
pod_cidr() {
  case "${2:-$(primary_family)}" in
    4) echo "10.244.$1.0/24" ;;
    6) echo "fd00:10:244:$1::/64" ;;
  esac
}
# join FUNC ARG: "FUNC ARG 4,FUNC ARG 6" over the families, primary first.
join() { local f out=(); for f in $(families); do out+=("$("$1" "$2" "$f")"); done; (IFS=,; echo "${out[*]}"); }
node_ips() { join node_ip "$1"; }
pod_cidrs() { join pod_cidr "$1"; }
# cp_ip [FAM]: the control plane's address.
cp_ip() { case "${1:-$(primary_family)}" in 4) echo "$CP_IP4" ;; 6) echo "$CP_IP6" ;; esac; }
# hostport HOST PORT: HOST:PORT, with brackets around an IPv6 address.
hostport() { case "$1" in *:*) echo "[$1]:$2" ;; *) echo "$1:$2" ;; esac; }

# ns_ipv6_sysctls NS: forwarding on, duplicate address detection off for
# every interface there is and every one created later in NS.
ns_ipv6_sysctls() {
  nsenter --net="/run/netns/$1" sysctl -qw net.ipv6.conf.all.forwarding=1 \
    net.ipv6.conf.default.forwarding=1 net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
}

net_up() {
  local cp="$PREFIX-cp" n m ns f
  ip netns add "$cp"
  has_family 6 && ns_ipv6_sysctls "$cp"
  ip -n "$cp" link set lo up
  ip -n "$cp" link add "$PREFIX-br0" type bridge
  # Neighbour solicitations are multicast: flood them instead of relying on
  # MLD snooping with no querier on this bridge.
  has_family 6 && ip -n "$cp" link set "$PREFIX-br0" type bridge mcast_snooping 0
  has_family 4 && ip -n "$cp" addr add "$CP_IP4/24" dev "$PREFIX-br0"
  has_family 6 && ip -n "$cp" addr add "$CP_IP6/64" dev "$PREFIX-br0" nodad
  ip -n "$cp" link set "$PREFIX-br0" up
  has_family 4 && nsenter --net="/run/netns/$cp" sysctl -qw net.ipv4.ip_forward=1
  for n in $(seq "$NODES"); do
    ns="$(node_name "$n")"
    ip netns add "$ns"
    has_family 6 && ns_ipv6_sysctls "$ns"
    ip -n "$ns" link set lo up
    # Both ends are created inside namespaces: the host never holds either.
    ip -n "$cp" link add "n$n" type veth peer name eth0 netns "$ns"
    ip -n "$cp" link set "n$n" master "$PREFIX-br0" up
    if has_family 4; then
      ip -n "$ns" addr add "$(node_ip "$n" 4)/24" dev eth0
    fi
    if has_family 6; then
      ip -n "$ns" addr add "$(node_ip "$n" 6)/64" dev eth0 nodad
    fi
    ip -n "$ns" link set eth0 up
    has_family 4 && ip -n "$ns" route add default via "$CP_IP4"
    has_family 6 && ip -n "$ns" -6 route add default via "$CP_IP6"
    for f in $(families); do
      ip -n "$cp" route add "$(pod_cidr "$n" "$f")" via "$(node_ip "$n" "$f")"
    done
    has_family 4 && nsenter --net="/run/netns/$ns" sysctl -qw net.ipv4.ip_forward=1
    nsenter --net="/run/netns/$ns" sysctl -qw \
      net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1
  done
  for n in $(seq "$NODES"); do
    for m in $(seq "$NODES"); do
      [ "$n" = "$m" ] && continue
      for f in $(families); do
        ip -n "$(node_name "$n")" route add "$(pod_cidr "$m" "$f")" via "$(node_ip "$m" "$f")"
      done
    done
  done
}

net_down() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$PREFIX-(cp|node[0-9]+)$"); do
    ip netns del "$ns" || log "could not delete netns $ns"
  done
}
