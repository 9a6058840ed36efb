#!/usr/bin/env bash
# boot-arm64.sh ARCHIVE: boot the linux/arm64 image of ARCHIVE (`make image`'s
# oci-archive) on Debian's arm64 kernel in qemu-system-aarch64 (TCG; no
# KVM needed) and run its tools against that kernel.
#
# check.sh runs the arm64 binaries under qemu-user, which translates system
# calls but has no NETLINK_NETFILTER sockets: the nf_tables iptables stops
# at its first one there. Here the image's own file system is the
# initramfs, so the same aarch64 binaries talk to a real aarch64 kernel:
# switchyard --version, iptables --version, a nat chain with a DNAT rule
# written by iptables-nft and read back by iptables-save and nft, and the
# versions of ip6tables, ipset and conntrack. Added to the initramfs, and
# to nothing else: the kernel's netfilter modules and kmod (modprobe and
# depmod; the image has neither, as the node's kernel loads its own modules).
#
# The kernel comes from Debian's mirror (mmdebstrap --variant=extract of
# linux-image-arm64 and kmod), cached under $SWITCHYARD_CACHE/images. Takes
# ~10 s once cached. Needs qemu-system-arm (installed here if missing) and
# busybox-static (its cpio). Exit status: 0 when every step passed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/images"
archive="${1:?usage: boot-arm64.sh ARCHIVE}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org}"
command -v qemu-system-aarch64 >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-arm
}
[ -x /bin/busybox ] || { echo "boot-arm64: busybox-static is missing (hack/install-deps.sh)" >&2; exit 1; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT

# The kernel and kmod, extracted (not installed: nothing runs) once.
kdir="$cache/kernel-arm64-$(sha256sum "$0" | cut -c1-16)"
if [ ! -e "$kdir/.done" ]; then
  rm -rf "$kdir"
  mmdebstrap --quiet --mode=root --variant=extract --architectures=arm64 --include=linux-image-arm64,kmod,libkmod2 \
    bookworm "$kdir" "deb $mirror/debian bookworm main" "deb $mirror/debian bookworm-updates main" \
    "deb $mirror/debian-security bookworm-security main" >&2
  touch "$kdir/.done"
fi
kver="$(ls "$kdir/lib/modules")"

(cd "$root" && go build -o "$tmp/ociimage" ./hack/ociimage)
fs="$tmp/fs"; mkdir "$fs"
"$tmp/ociimage" extract -platform linux/arm64 "$archive" | tar -C "$fs" -xf -
cp "$kdir/bin/kmod" "$fs/usr/bin/kmod"
cp -a "$kdir"/usr/lib/aarch64-linux-gnu/libkmod.so.2* "$fs/usr/lib/aarch64-linux-gnu/"
ln -s ../bin/kmod "$fs/usr/sbin/modprobe"; ln -s ../bin/kmod "$fs/usr/sbin/depmod"
mkdir -p "$fs/usr/lib/modules/$kver/kernel"
for d in net lib crypto arch; do cp -a "$kdir/lib/modules/$kver/kernel/$d" "$fs/usr/lib/modules/$kver/kernel/"; done
cp "$kdir/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$fs/usr/lib/modules/$kver/"
cat >"$fs/init" <<'INIT'
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
step() { echo "=== $*"; "$@" || echo "=== FAILED: $*"; }
depmod
echo "=== $(uname -m), kernel $(uname -r)"
step switchyard --version
step iptables --version
step modprobe nf_tables
step iptables -t nat -N SY-CHECK
step iptables -t nat -A SY-CHECK -p tcp -d 10.96.0.10 --dport 53 -j DNAT --to-destination 10.244.1.5:53
step iptables-save -t nat
step nft list ruleset
step ip6tables --version
step ipset --version
step conntrack --version
echo "=== end"
INIT
chmod 0755 "$fs/init"
(cd "$fs" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1 >"$tmp/initrd.gz")
# The init exits at the end: the kernel panics, and -no-reboot ends qemu.
timeout 600 qemu-system-aarch64 -M virt -cpu cortex-a57 -smp 2 -m 1024 -nographic -nodefaults -serial stdio \
  -kernel "$kdir/boot/vmlinuz-$kver" -initrd "$tmp/initrd.gz" -no-reboot \
  -append "console=ttyAMA0 rdinit=/init panic=-1 quiet" </dev/null >"$tmp/console" 2>&1 || true
sed -n '/^=== /,/^=== end/p' "$tmp/console" | grep -v '^# Warning: table'
grep -q '^=== end' "$tmp/console" || { echo "boot-arm64: the VM did not finish; console:" >&2; tail -n 30 "$tmp/console" >&2; exit 1; }
! grep -q '^=== FAILED' "$tmp/console" && grep -q 'dnat to 10.244.1.5:53' "$tmp/console" ||
  { echo "boot-arm64: FAILED" >&2; exit 1; }
echo "boot-arm64: OK"
