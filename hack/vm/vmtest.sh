#!/bin/sh
# vmtest.sh BINARY [ARGS...]
#
# Runs BINARY (static: CGO_ENABLED=0) as root inside a throw-away QEMU VM
# booted from the Debian kernel prepared by fetch-deps.sh and
# build-base.sh, and exits with BINARY's exit status. Usable as a
# `go test -exec` wrapper:
#
#   CGO_ENABLED=0 go test -exec "$PWD/hack/vm/vmtest.sh" ./backends/ipvs/
#
# The guest has no network (unless VM_NIC says otherwise), sets IPVS_VM=1
# (tests that need the VM's kernel skip without it) and powers off when
# BINARY ends. The guest prints "VMTEST-RESULT: rc=N"; without that line
# (boot failure, guest crash, timeout) the exit status is 125.
#
# Environment:
#   VMTEST_WORK  kernel directory (default: the cache's vm/current)
#   VM_ACCEL     tcg (default) or kvm; kvm only on hosts with real VMX/SVM
#   VM_SMP, VM_MEM (MiB), VM_TIMEOUT (s): 2, 1024, 900
#   VM_ENV       "K=V ..." exported in the guest before BINARY runs
#   VM_EXTRA     files or directories copied next to BINARY
#   VM_NIC       the -nic option (default none), e.g.
#                user,model=virtio-net-pci,restrict=on,guestfwd=... (the
#                guest then needs modprobe virtio_net and an address)
#   VM_LOG       also save the console log to this file
#   VM_QUIET=1   do not echo the boot/wall-time lines on stderr
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

[ $# -ge 1 ] || die "usage: vmtest.sh BINARY [ARGS...]"
bin=$1
shift
work=${VMTEST_WORK:-$SY_VM_ROOT/current}
[ -e "$work/base.cpio" ] && [ -e "$work/vmlinuz" ] ||
	die "$work/base.cpio missing: run hack/vm/fetch-deps.sh and hack/vm/build-base.sh"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run hack/vm/fetch-deps.sh"

run=$(mktemp -d "${TMPDIR:-/tmp}/sy-vmtest.XXXXXX") # one per run: go test runs packages in parallel
trap 'rm -rf "$run"' EXIT
mkdir -p "$run/overlay/t"
cp "$bin" "$run/overlay/t/"
for x in ${VM_EXTRA:-}; do cp -a "$x" "$run/overlay/t/"; done

# Quote every argument for the guest's shell.
args=""
for a in "$@"; do
	args="$args '$(printf '%s' "$a" | sed "s/'/'\\\\''/g")'"
done

cat >"$run/overlay/init" <<INIT
#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root IPVS_VM=1 ${VM_ENV:-}
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
echo "1 4 1 7" >/proc/sys/kernel/printk
echo /sbin/modprobe >/proc/sys/kernel/modprobe
ip link set lo up
echo "VMTEST-START uptime=\$(cut -d' ' -f1 /proc/uptime)"
cd /t
./$(basename "$bin") $args
rc=\$?
echo "VMTEST-RESULT: rc=\$rc uptime=\$(cut -d' ' -f1 /proc/uptime)"
poweroff -f
INIT
chmod +x "$run/overlay/init"
(cd "$run/overlay" && find . | LC_ALL=C sort | "$work/userland/bin/busybox" cpio -o -H newc 2>/dev/null) >"$run/overlay.cpio"
# The kernel unpacks concatenated archives in order; later files win.
cat "$work/base.cpio" "$run/overlay.cpio" >"$run/initrd.cpio"

case ${VM_ACCEL:-tcg} in
kvm) accel="-accel kvm -cpu host" ;;
*) accel="-accel tcg,thread=multi -cpu max" ;;
esac
start=$(date +%s.%N)
set +e
# panic=-1 with -no-reboot: a guest panic ends qemu at once.
# shellcheck disable=SC2086 # $accel is several words
timeout -k 5 "${VM_TIMEOUT:-900}" qemu-system-x86_64 $accel -m "${VM_MEM:-1024}" -smp "${VM_SMP:-2}" \
	-display none -vga none -no-reboot -nic "${VM_NIC:-none}" -monitor none -serial stdio \
	-kernel "$work/vmlinuz" -initrd "$run/initrd.cpio" \
	-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=3" </dev/null 2>&1 |
	sed -u 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1bc//g; s/\r$//' | tee "$run/console.log"
set -e
end=$(date +%s.%N)
if [ -n "${VM_LOG:-}" ]; then cp "$run/console.log" "$VM_LOG"; fi
[ "${VM_QUIET:-0}" = 1 ] || echo "vmtest: wall $(echo "$end $start" | awk '{printf "%.1f", $1 - $2}')s (accel=${VM_ACCEL:-tcg})" >&2
rc=$(sed -n 's/.*VMTEST-RESULT: rc=\([0-9]*\).*/\1/p' "$run/console.log" | tail -n 1)
if [ -z "$rc" ]; then
	echo "vmtest: no result line (boot failure, guest crash or timeout)" >&2
	exit 125
fi
exit "$rc"
