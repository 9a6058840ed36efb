#!/bin/sh
# test-ipvs.sh [go test flags...]
#
# Runs the IPVS backend's kernel tests in a throw-away QEMU VM (Debian's
# cloud kernel: this host's kernel has no IP_VS and no dummy interface):
# fetch-deps.sh and build-base.sh (both cached), a static test binary,
# then vmtest.sh. Prints the test output and the wall times.
#
#   hack/vm/test-ipvs.sh                    # all tests, -test.v
#   hack/vm/test-ipvs.sh -test.run TestKernel/rr
#   SWITCHYARD_IPVS_BENCH=1 hack/vm/test-ipvs.sh -test.run TestKernelSyncBench
#
# Extra arguments go to the test binary (-test.* flags). Environment:
# SWITCHYARD_CACHE (cache root), SWITCHYARD_IPVS_BENCH=1 (sync
# benchmark), VM_* (see vmtest.sh).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
. "$HERE/lib.sh"

t0=$(date +%s.%N)
dir=$("$HERE/fetch-deps.sh" | tail -n 1)
"$HERE/build-base.sh" "$dir" >/dev/null
t1=$(date +%s.%N)

bin=$(mktemp -d "${TMPDIR:-/tmp}/sy-ipvs-test.XXXXXX")
trap 'rm -rf "$bin"' EXIT
(cd "$ROOT" && CGO_ENABLED=0 go test -c -o "$bin/ipvs.test" ./backends/ipvs/)
t2=$(date +%s.%N)

env_in_vm=${VM_ENV:-}
if [ -n "${SWITCHYARD_IPVS_BENCH:-}" ]; then
	env_in_vm="$env_in_vm SWITCHYARD_IPVS_BENCH=$SWITCHYARD_IPVS_BENCH"
fi
[ $# -gt 0 ] || set -- -test.run 'TestKernel' -test.v
set +e
VMTEST_WORK=$dir VM_ENV=$env_in_vm "$HERE/vmtest.sh" "$bin/ipvs.test" -test.timeout=14m "$@"
rc=$?
set -e
t3=$(date +%s.%N)
echo "test-ipvs: deps+base $(echo "$t1 $t0" | awk '{printf "%.1f", $1-$2}')s," \
	"go test -c $(echo "$t2 $t1" | awk '{printf "%.1f", $1-$2}')s," \
	"VM $(echo "$t3 $t2" | awk '{printf "%.1f", $1-$2}')s, exit $rc" >&2
exit $rc
