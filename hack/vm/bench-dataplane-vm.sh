#!/usr/bin/env bash
# bench-dataplane-vm.sh — `make bench-dataplane-vm`: the data-path benchmark
# (e2e TestBenchDataplane, load generator hack/bench/dataplane) inside the
# QEMU VM, for the mode this host's kernel cannot run: ipvs. Not part of
# `make test`.
#
# The Services live in a control plane on the host's loopback
# (hack/local-up.sh on free ports, stopped at the end): the background
# through the API, or above 20k Services straight into its etcd by the e2e
# framework's seeder, as `make bench-dataplane` does. The guest reaches the
# apiserver and the etcd through one QEMU guestfwd each (restrict=on: no
# other address outside the VM); e2e-guest.sh exposes them again on the
# guest's loopback and runs e2e.test. Every path's topology (node, client
# and pod namespaces), its proxy and every packet measured stay in the VM.
#
# The VM runs under TCG (this host has no usable KVM): absolute figures are
# an emulated CPU's and not comparable with the host's; within one run the
# ratios to the direct path are, and their trend in N is the point. Every
# result line carries env=vm-tcg; the run ends with one
# `dataplane-vm-result:` line.
#
# Knobs (environment), as bench-dataplane's: SIZES ("1000 10000"), DURATION
# (3s), ROUNDS (3), PATHS ("direct switchyard:ipvs switchyard:nftables
# switchyard:iptables"), VIAS ("clusterip nodeport local"), WORKLOADS
# ("short latency stream udp"), CLIENTS (16), SKIP, SYNC_WAIT (10m), OUT (a
# file that also gets the tables and result lines), SWITCHYARD_SCALE_SEED.
# VM: VM_MEM (4096 MiB; 6144 when a size is above 20k), VM_SMP (2),
# VM_TIMEOUT (s; default from the sizes), VM_LOG (keep the console log).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"

now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.1f", $2 - $1}'; }

SIZES=${SIZES:-1000 10000}
PATHS=${PATHS:-direct switchyard:ipvs switchyard:nftables switchyard:iptables}
largest=0
for n in $SIZES; do
	case $n in '' | *[!0-9]*) die "SIZES=\"$SIZES\": want positive integers" ;; esac
	largest=$n
done
[ "$largest" -gt 0 ] || die "SIZES is empty"

sy_host_work sy-bench-dp-vm

t0=$(now)
dir=$("$HERE/fetch-deps.sh")
"$HERE/build-base.sh" "$dir" >/dev/null
t1=$(now)

# --- static binaries for the guest ----------------------------------------
(
	cd "$ROOT"
	export CGO_ENABLED=0
	go build -trimpath -ldflags '-s -w' -o "$work/t/" ./cmd/switchyard ./e2e/echoserver ./hack/nsforward
	go build -trimpath -ldflags '-s -w' -o "$work/t/dataplane" ./hack/bench/dataplane
	go test -c -tags e2e -trimpath -ldflags '-s -w' -o "$work/t/e2e.test" ./e2e/
)
cp "$ROOT/go.mod" "$work/t/" # framework.RepoRoot finds /t by it
cp -r "$ROOT/deploy" "$work/t/"
tools=$("$ROOT/hack/build-tools.sh" kube-apiserver etcd kubectl 2>"$work/tools.log") ||
	{ cat "$work/tools.log" >&2; die "hack/build-tools.sh failed"; }
t2=$(now)

# --- control plane on the host's loopback ----------------------------------
cluster_run=$work/cluster
api=$(free_port)
etcd=$(free_port)
peer=$(free_port)
RUN_DIR=$cluster_run TOOLS_BIN=$tools APISERVER_PORT=$api ETCD_PORT=$etcd ETCD_PEER_PORT=$peer \
	SERVICE_CIDR=10.96.0.0/16 "$ROOT/hack/local-up.sh" up >/dev/null
"$tools/kubectl" --kubeconfig "$cluster_run/admin.kubeconfig" config view --raw --flatten --minify >"$work/t/admin.kubeconfig"
t3=$(now)

# --- the VM ------------------------------------------------------------------
# Values with spaces go through guest.env (VM_ENV is "K=V ..." words).
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
{
	echo "export SWITCHYARD_BENCH_DP_SIZES=$(q "$SIZES")"
	echo "export SWITCHYARD_BENCH_DP_PATHS=$(q "$PATHS")"
	echo "export SWITCHYARD_BENCH_DP_DURATION=$(q "${DURATION:-3s}")"
	echo "export SWITCHYARD_BENCH_DP_ROUNDS=$(q "${ROUNDS:-3}")"
	echo "export SWITCHYARD_BENCH_DP_CLIENTS=$(q "${CLIENTS:-16}")"
	echo "export SWITCHYARD_BENCH_DP_ENV=vm-tcg"
	for kv in "VIAS:SWITCHYARD_BENCH_DP_VIAS" "WORKLOADS:SWITCHYARD_BENCH_DP_WORKLOADS" \
		"SKIP:SWITCHYARD_BENCH_DP_SKIP" "SYNC_WAIT:SWITCHYARD_BENCH_DP_SYNC_WAIT" \
		"SWITCHYARD_SCALE_SEED:SWITCHYARD_SCALE_SEED"; do
		name=${kv%%:*}
		v=${!name:-}
		if [ -n "$v" ]; then echo "export ${kv#*:}=$(q "$v")"; fi
	done
	# The guest is thrown away at the end: its conntrack table is sized
	# for the short-connection workloads (TIME_WAIT flows stay 2 min).
	echo "modprobe nf_conntrack && sysctl -qw net.netfilter.nf_conntrack_max=524288"
} >"$work/t/guest.env"
guest_env="SY_API_PORT=$api SY_ETCD_PORT=$etcd SWITCHYARD_KUBECONFIG=/t/admin.kubeconfig
	SWITCHYARD_ETCD_ENDPOINT=http://127.0.0.1:$etcd SWITCHYARD_PROMETHEUS=none
	SWITCHYARD_BIN=/t/switchyard SWITCHYARD_NSFORWARD_BIN=/t/nsforward
	SWITCHYARD_ECHOSERVER_BIN=/t/echoserver SWITCHYARD_BENCH_DP_BIN=/t/dataplane"
extra=""
for f in "$work"/t/*; do extra="$extra $f"; done
mem=${VM_MEM:-4096}
if [ -z "${VM_MEM:-}" ] && [ "$largest" -gt 20000 ]; then mem=6144; fi
# Per N: the first syncs (TCG), then ROUNDS x vias x workloads x paths
# measurements of DURATION; generous, the outer bound of a hung guest.
timeout=${VM_TIMEOUT:-$((1800 + $(echo "$SIZES" | wc -w) * 2400))}
log=${VM_LOG:-$work/console.log}
bb=$dir/userland/bin/busybox
set +e
# shellcheck disable=SC2086,SC2116 # $guest_env flattened into one line of words
VMTEST_WORK=$dir VM_LOG=$log VM_EXTRA=$extra VM_ENV="$(echo $guest_env) ${VM_ENV:-}" \
	VM_TIMEOUT=$timeout VM_MEM=$mem \
	VM_NIC="user,model=virtio-net-pci,restrict=on,guestfwd=tcp:10.0.2.100:$api-cmd:$bb nc 127.0.0.1 $api,guestfwd=tcp:10.0.2.100:$etcd-cmd:$bb nc 127.0.0.1 $etcd" \
	"$HERE/vmtest.sh" "$HERE/e2e-guest.sh" -test.run '^TestBenchDataplane$' -test.v -test.timeout "$((timeout - 60))s" |
	grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'
rc=${PIPESTATUS[0]}
set -e
t4=$(now)

if [ -n "${OUT:-}" ]; then
	# The tables and result lines, as bench-dataplane's OUT holds them.
	grep -E '^(\||dataplane|[0-9]+ Services \()' "$log" >"$OUT" || true
fi
up_start=$(sed -n 's/.*VMTEST-START uptime=\([0-9.]*\).*/\1/p' "$log" | head -n 1)
up_end=$(sed -n 's/.*VMTEST-RESULT: rc=[0-9]* uptime=\([0-9.]*\).*/\1/p' "$log" | tail -n 1)
tests="?"
if [ -n "$up_start" ] && [ -n "$up_end" ]; then tests=$(secs "$up_start" "$up_end"); fi
echo "bench-dataplane-vm: deps+base $(secs "$t0" "$t1")s, binaries $(secs "$t1" "$t2")s," \
	"control plane $(secs "$t2" "$t3")s, VM $(secs "$t3" "$t4")s" \
	"(guest boot ${up_start:-?}s, benchmark ${tests}s), total $(secs "$t0" "$t4")s, exit $rc" >&2
exit "$rc"
