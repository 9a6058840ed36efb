#!/usr/bin/env bash
# Masqueraded short TCP connections against endpoints that close first:
# which SNAT port choice (and which sysctls) make the endpoints' TIME_WAIT
# sockets refuse SYNs (PAWS) and the clients retransmit them. No proxy: a
# hand-written nftables NodePort (30080 masqueraded, 30081 DNAT only) over
# two endpoints, in namespaces created and deleted here (b44m-*). Each
# variant runs the load generator (hack/bench/dataplane) "short" then
# "latency" for DURATION each from a fresh topology and prints the rates,
# the connect p50/p99 and, per 1000 connections, the counters that tell
# the story. Needs root. See docs/performance.md ("Masqueraded NodePorts
# and TIME_WAIT").
#
#   hack/bench/masq-timewait.sh [VARIANT...]   (default: all of them)
#   DURATION=3s CLIENTS=16
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" != 0 ]; then
  echo "masq-timewait: needs root (network namespaces)" >&2
  exit 1
fi
DUR=${DURATION:-3s}
P=b44m
NODE=$P-node CLI=$P-client POD1=$P-pod1 POD2=$P-pod2
tmp=$(mktemp -d)
pids=()
teardown() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  for ns in $POD1 $POD2 $CLI $NODE; do ip netns del $ns 2>/dev/null || true; done
}
trap 'teardown; rm -rf "$tmp"' EXIT
${GO:-go} build -o "$tmp/dataplane" ./hack/bench/dataplane

# setup MASQ POD_SYSCTLS CLI_SYSCTLS: the topology, the rules, the servers.
setup() {
  local masq=$1 podsys=$2 clisys=$3
  for ns in $NODE $CLI $POD1 $POD2; do ip netns add $ns; ip -n $ns link set lo up; done
  ip netns exec $NODE sysctl -qw net.ipv4.ip_forward=1
  ip -n $NODE link add br0 type bridge
  ip -n $NODE addr add 10.244.1.1/24 dev br0
  ip -n $NODE link set br0 up
  local i=0 ns
  for ns in $POD1 $POD2; do
    i=$((i + 1))
    ip -n $NODE link add veth$i type veth peer name eth0 netns $ns
    ip -n $NODE link set veth$i master br0 up
    ip -n $ns addr add 10.244.1.1$i/24 dev eth0
    ip -n $ns link set eth0 up
    ip -n $ns route add default via 10.244.1.1
    for kv in $podsys; do ip netns exec $ns sysctl -qw "$kv"; done
  done
  ip -n $NODE link add vext type veth peer name eth0 netns $CLI
  ip -n $NODE addr add 192.168.222.1/24 dev vext
  ip -n $NODE link set vext up
  ip -n $CLI addr add 192.168.222.2/24 dev eth0
  ip -n $CLI link set eth0 up
  ip -n $CLI route add default via 192.168.222.1
  # As the benchmark's topology: short connections cycle the ports fast.
  for ns in $CLI $NODE; do ip netns exec $ns sysctl -qw net.ipv4.ip_local_port_range="1024 65000"; done
  for kv in $clisys; do ip netns exec $CLI sysctl -qw "$kv"; done
  ip netns exec $NODE nft -f - <<EOF
table ip b44m {
  chain ep1 { meta mark set meta mark or 0x4000; meta l4proto tcp dnat to 10.244.1.11:9000; }
  chain ep2 { meta mark set meta mark or 0x4000; meta l4proto tcp dnat to 10.244.1.12:9000; }
  chain lep1 { meta l4proto tcp dnat to 10.244.1.11:9000; }
  chain lep2 { meta l4proto tcp dnat to 10.244.1.12:9000; }
  chain pre {
    type nat hook prerouting priority dstnat;
    ip daddr 192.168.222.1 tcp dport 30080 numgen random mod 2 vmap { 0 : goto ep1, 1 : goto ep2 }
    ip daddr 192.168.222.1 tcp dport 30081 numgen random mod 2 vmap { 0 : goto lep1, 1 : goto lep2 }
  }
  chain post {
    type nat hook postrouting priority srcnat;
    meta mark & 0x4000 == 0 return
    meta mark set meta mark xor 0x4000
    $masq
  }
}
EOF
  for ns in $POD1 $POD2; do
    ip netns exec $ns nice -n 19 taskset -c 1 "$tmp/dataplane" serve -rr :9000 -sink :9001 -udp :9002 &
    pids+=($!)
  done
  sleep 0.5
}

field() { # FILE NAME: a number of the load generator's JSON line
  grep -o "\"$2\":[0-9.e+-]*" "$1" | cut -d: -f2
}

counters() { # NS: "name value" lines of nstat -az
  ip netns exec "$1" nstat -az | awk 'NR > 1 { print $1, $2 }' | sort
}

# variant NAME ADDR MASQ [POD_SYSCTLS [CLI_SYSCTLS]]
variant() {
  local name=$1 addr=$2 masq=$3 podsys=${4:-} clisys=${5:-}
  setup "$masq" "$podsys" "$clisys"
  counters $CLI >"$tmp/cli.0"; counters $POD1 >"$tmp/p1.0"; counters $POD2 >"$tmp/p2.0"
  local ops=0 line="" w
  for w in short latency; do
    ip netns exec $CLI nice -n 19 taskset -c 0 "$tmp/dataplane" $w -addr "$addr" -duration "$DUR" -clients "${CLIENTS:-16}" >"$tmp/$w.json"
    ops=$((ops + $(field "$tmp/$w.json" ops)))
    line+=$(printf '%s %.0f/s p50 %.0f p99 %.0f us err %s  ' $w "$(field "$tmp/$w.json" rate)" \
      "$(field "$tmp/$w.json" connect_p50_us)" "$(field "$tmp/$w.json" connect_p99_us)" "$(field "$tmp/$w.json" errors)")
  done
  counters $CLI >"$tmp/cli.1"; counters $POD1 >"$tmp/p1.1"; counters $POD2 >"$tmp/p2.1"
  delta() { join "$1" "$2" | awk -v k="$3" '$1 == k { print $3 - $2 }'; }
  local paws=$(($(delta "$tmp/p1.0" "$tmp/p1.1" TcpExtPAWSTimewait) + $(delta "$tmp/p2.0" "$tmp/p2.1" TcpExtPAWSTimewait)))
  local twof=$(($(delta "$tmp/p1.0" "$tmp/p1.1" TcpExtTCPTimeWaitOverflow) + $(delta "$tmp/p2.0" "$tmp/p2.1" TcpExtTCPTimeWaitOverflow)))
  local syn rst
  syn=$(delta "$tmp/cli.0" "$tmp/cli.1" TcpExtTCPSynRetrans)
  rst=$(delta "$tmp/cli.0" "$tmp/cli.1" TcpOutRsts)
  printf '%-20s %s\n' "$name" "$line"
  awk -v n="$ops" -v p="$paws" -v s="$syn" -v r="$rst" -v o="$twof" 'BEGIN {
    printf "%-20s %d connections; per 1000: endpoints PAWSTimewait %.2f TimeWaitOverflow %.1f, client TCPSynRetrans %.2f OutRsts %.2f\n", "", n, p*1000/n, o*1000/n, s*1000/n, r*1000/n }'
  teardown
}

np=192.168.222.1:30080
run_one() {
  case $1 in
    direct) variant direct 10.244.1.11:9000,10.244.1.12:9000 "masquerade fully-random" ;;
    local) variant local 192.168.222.1:30081 "masquerade fully-random" ;;
    fully-random) variant fully-random $np "masquerade fully-random" ;;
    random) variant random $np "masquerade random" ;;
    plain) variant plain $np "masquerade" ;;
    tcp-kept) variant tcp-kept $np $'meta l4proto tcp masquerade\n    masquerade fully-random' ;;
    pod-ts0) variant pod-ts0 $np "masquerade fully-random" net.ipv4.tcp_timestamps=0 ;;
    pod-maxtw0) variant pod-maxtw0 $np "masquerade fully-random" net.ipv4.tcp_max_tw_buckets=0 ;;
    client-ts2) variant client-ts2 $np "masquerade fully-random" "" net.ipv4.tcp_timestamps=2 ;;
    *) echo "masq-timewait: unknown variant $1" >&2; exit 2 ;;
  esac
}
for v in "${@:-direct local fully-random random plain tcp-kept pod-ts0 pod-maxtw0 client-ts2}"; do
  for one in $v; do run_one "$one"; done
done
