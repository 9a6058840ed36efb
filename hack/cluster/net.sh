# net.sh: the cluster's network, all of it inside namespaces this script
# creates (sourced by cluster.sh). Nothing is added to the host namespace.
#
#   $PREFIX-cp     control plane; bridge $PREFIX-br0 with $CP_IP/24 joins the
#                  nodes; routes every node's pod CIDR to that node; no route
#                  leaves it, so no packet reaches any address outside.
#   $PREFIX-nodeN  node N: eth0 $NODE_NET.(10+N), default route via $CP_IP;
#                  pods on the CNI bridge cbr0 in 10.244.N.0/24; routes to
#                  the other nodes' pod CIDRs via their node IPs.

node_name() { echo "$PREFIX-node$1"; }
node_ip() { echo "$NODE_NET.$((10 + $1))"; }
pod_cidr() { echo "10.244.$1.0/24"; }

net_up() {
  local cp="$PREFIX-cp" n m ns
  ip netns add "$cp"
  ip -n "$cp" link set lo up
  ip -n "$cp" link add "$PREFIX-br0" type bridge
  ip -n "$cp" addr add "$CP_IP/24" dev "$PREFIX-br0"
  ip -n "$cp" link set "$PREFIX-br0" up
  nsenter --net="/run/netns/$cp" sysctl -qw net.ipv4.ip_forward=1
  for n in $(seq "$NODES"); do
    ns="$(node_name "$n")"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Both ends are created inside namespaces: the host never holds either.
    ip -n "$cp" link add "n$n" type veth peer name eth0 netns "$ns"
    ip -n "$cp" link set "n$n" master "$PREFIX-br0" up
    ip -n "$ns" addr add "$(node_ip "$n")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$CP_IP"
    ip -n "$cp" route add "$(pod_cidr "$n")" via "$(node_ip "$n")"
    nsenter --net="/run/netns/$ns" sysctl -qw net.ipv4.ip_forward=1 \
      net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1
  done
  for n in $(seq "$NODES"); do
    for m in $(seq "$NODES"); do
      [ "$n" = "$m" ] || ip -n "$(node_name "$n")" route add "$(pod_cidr "$m")" via "$(node_ip "$m")"
    done
  done
}

net_down() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$PREFIX-(cp|node[0-9]+)$"); do
    ip netns del "$ns" || log "could not delete netns $ns"
  done
}
