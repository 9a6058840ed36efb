#!/bin/sh
# e2e-ipvs.sh [e2e.test flags...]
#
# The e2e traffic table (TestDataplane) in ipvs mode: the real switchyard
# daemon, the echo-server pods and their network namespaces run inside a
# throw-away QEMU VM (Debian's kernel has IP_VS; this host's has not),
# against a control plane on the host's loopback.
#
# The guest's only network is QEMU user networking with restrict=on and one
# guestfwd, 10.0.2.100:PORT in the guest -> 127.0.0.1:PORT on the host (the
# apiserver); QEMU runs the static busybox's `nc 127.0.0.1 PORT` for each
# connection. Nothing else leaves the VM: every packet of the tests stays in
# the guest's namespaces. In the guest (e2e-guest.sh) nsforward exposes the
# apiserver at 127.0.0.1:PORT again, so the kubeconfigs and the apiserver's
# certificate work unchanged, and e2e.test runs with the framework reusing
# that cluster and the prebuilt binaries. The daemon authenticates with a
# ServiceAccount token minted by the framework, as on the host.
#
# Steps, each timed: fetch-deps.sh + build-base.sh (cached), static
# binaries (switchyard, echoserver, nsforward, e2e.test), the control plane
# (hack/local-up.sh on free ports, stopped at the end; or
# $SWITCHYARD_KUBECONFIG), the VM (vmtest.sh). Exits with e2e.test's
# status, 125 when the VM gave none (boot failure, crash, VM_TIMEOUT).
#
# Default flags: -test.run '^(TestDataplane|TestTakeover|TestVanishedEndpointReset)$' -test.v -test.timeout 9m
# (with SWITCHYARD_E2E_MODES=ipvs: the ipvs traffic table, and the takeover
# pairs switchyard iptables <-> ipvs).
#
# Environment:
#   SWITCHYARD_KUBECONFIG  reuse this cluster (server https://127.0.0.1:PORT;
#                          without an IPv6 service range the ipv6 and dual
#                          shapes skip)
#   SWITCHYARD_E2E_FAMILIES  IP family shapes of the table (ipv4,ipv6,dual:
#                          the default is all three)
#   SWITCHYARD_PROMETHEUS  prometheus binary copied into the VM (default:
#                          `prometheus` on $PATH); "none" skips the scrape
#   SWITCHYARD_CACHE       cache root (VM kernel, tools)
#   VM_TIMEOUT (600 s), VM_MEM (2048 MiB), VM_SMP, VM_ACCEL, VM_ENV, VM_LOG:
#                          see vmtest.sh
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"

now() { date +%s.%N; }
secs() { echo "$1 $2" | awk '{printf "%.1f", $2 - $1}'; }

sy_host_work sy-e2e-ipvs

t0=$(now)
dir=$("$HERE/fetch-deps.sh") # stdout is the directory alone; no pipe hides a failure
"$HERE/build-base.sh" "$dir" >/dev/null
t1=$(now)

# --- static binaries for the guest (no Go toolchain, no libc there) --------
(
	cd "$ROOT"
	export CGO_ENABLED=0
	go build -trimpath -ldflags '-s -w' -o "$work/t/" ./cmd/switchyard ./e2e/echoserver ./hack/nsforward
	go test -c -tags e2e -trimpath -ldflags '-s -w' -o "$work/t/e2e.test" ./e2e/
)
cp "$ROOT/go.mod" "$work/t/" # framework.RepoRoot finds /t by it
cp -r "$ROOT/deploy" "$work/t/"
tools=$("$ROOT/hack/build-tools.sh" kube-apiserver etcd kubectl 2>"$work/tools.log") ||
	{ cat "$work/tools.log" >&2; die "hack/build-tools.sh failed"; }
t2=$(now)

# --- control plane on the host's loopback ----------------------------------
kc=${SWITCHYARD_KUBECONFIG:-}
if [ -z "$kc" ]; then
	cluster_run=$work/cluster
	api=$(free_port)
	etcd=$(free_port)
	peer=$(free_port)
	# Dual-stack service range (IPv4 first, as the e2e framework's own
	# control plane): the table runs in the ipv4, ipv6 and dual shapes.
	RUN_DIR=$cluster_run TOOLS_BIN=$tools APISERVER_PORT=$api ETCD_PORT=$etcd ETCD_PEER_PORT=$peer \
		SERVICE_CIDR=10.96.0.0/16,fd00:10:96::/112 "$ROOT/hack/local-up.sh" up >/dev/null
	kc=$cluster_run/admin.kubeconfig
fi
# One self-contained file (CA inline) for the guest.
"$tools/kubectl" --kubeconfig "$kc" config view --raw --flatten --minify >"$work/t/admin.kubeconfig"
server=$("$tools/kubectl" --kubeconfig "$work/t/admin.kubeconfig" config view -o jsonpath='{.clusters[0].cluster.server}')
port=${server#https://127.0.0.1:}
case $port in
'' | *[!0-9]*) die "apiserver $server: want https://127.0.0.1:PORT (the VM forwards one loopback port)" ;;
esac
t3=$(now)

# --- the VM ------------------------------------------------------------------
guest_env="SY_API_PORT=$port SWITCHYARD_E2E_MODES=ipvs SWITCHYARD_KUBECONFIG=/t/admin.kubeconfig
	SWITCHYARD_BIN=/t/switchyard SWITCHYARD_ECHOSERVER_BIN=/t/echoserver SWITCHYARD_NSFORWARD_BIN=/t/nsforward"
if [ -n "${SWITCHYARD_E2E_FAMILIES:-}" ]; then
	guest_env="$guest_env SWITCHYARD_E2E_FAMILIES=$(echo "$SWITCHYARD_E2E_FAMILIES" | tr ' ' ,)"
fi
prom=${SWITCHYARD_PROMETHEUS:-$(command -v prometheus || true)}
if [ -n "$prom" ] && [ "$prom" != none ]; then
	cp "$prom" "$work/t/prometheus"
	guest_env="$guest_env SWITCHYARD_PROMETHEUS=/t/prometheus"
else
	guest_env="$guest_env SWITCHYARD_PROMETHEUS=none"
fi
extra=""
for f in "$work"/t/*; do extra="$extra $f"; done
[ $# -gt 0 ] || set -- -test.run '^(TestDataplane|TestTakeover|TestVanishedEndpointReset)$' -test.v -test.timeout 9m
log=$work/console.log
set +e
VMTEST_WORK=$dir VM_LOG=$log VM_EXTRA=$extra VM_ENV="$(echo $guest_env) ${VM_ENV:-}" \
	VM_TIMEOUT=${VM_TIMEOUT:-600} VM_MEM=${VM_MEM:-2048} \
	VM_NIC="user,model=virtio-net-pci,restrict=on,guestfwd=tcp:10.0.2.100:$port-cmd:$dir/userland/bin/busybox nc 127.0.0.1 $port" \
	"$HERE/vmtest.sh" "$HERE/e2e-guest.sh" "$@"
rc=$?
set -e
t4=$(now)

# The guest's uptime at the start and end of its job splits boot from tests.
up_start=$(sed -n 's/.*VMTEST-START uptime=\([0-9.]*\).*/\1/p' "$log" | head -n 1)
up_end=$(sed -n 's/.*VMTEST-RESULT: rc=[0-9]* uptime=\([0-9.]*\).*/\1/p' "$log" | tail -n 1)
tests="?"
if [ -n "$up_start" ] && [ -n "$up_end" ]; then tests=$(secs "$up_start" "$up_end"); fi
echo "e2e-ipvs: deps+base $(secs "$t0" "$t1")s, binaries $(secs "$t1" "$t2")s," \
	"control plane $(secs "$t2" "$t3")s, VM $(secs "$t3" "$t4")s" \
	"(guest boot ${up_start:-?}s, tests ${tests}s), total $(secs "$t0" "$t4")s, exit $rc" >&2
exit $rc
