#!/bin/sh
# fetch-deps.sh [--refresh]
#
# Makes sure qemu-system-x86_64 is installed, then downloads (apt-get
# download, nothing is installed) Debian's cloud kernel, busybox-static and
# the netfilter tools, and unpacks them with dpkg -x into
#   ${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/vm/<kernel-version>/
# It prints that directory on stdout (the last line).
#
# Warm cache: when vm/current points at a complete directory fetched for
# the current package list (lib.sh) it prints it and exits without touching
# apt; a longer list downloads only the added packages. --refresh
# re-resolves the kernel package (e.g. after Debian published a new ABI).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

refresh=0
[ "${1:-}" = "--refresh" ] && refresh=1

stamp=$(sy_pkg_stamp)
if [ "$refresh" = 0 ] && [ "$(cat "$SY_VM_ROOT/current/.fetched" 2>/dev/null)" = "$stamp" ]; then
	cd "$SY_VM_ROOT/current" && pwd -P
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
	echo "hack/vm: installing qemu-system-x86" >&2
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends qemu-system-x86 >&2
fi

resolve_kernel() {
	apt-cache depends "$SY_KERNEL_META" 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}
kpkg=$(resolve_kernel)
if [ -z "$kpkg" ] || [ "$refresh" = 1 ]; then
	apt-get update -qq >&2 || true
	kpkg=$(resolve_kernel)
fi
[ -n "$kpkg" ] || die "cannot resolve $SY_KERNEL_META with apt-cache"
kver=${kpkg#linux-image-}
dir=$SY_VM_ROOT/$kver
mkdir -p "$dir/debs"

# missing_debs: the packages of the list without a .deb in debs/.
missing_debs() {
	for p in "$kpkg" $SY_USERLAND_PKGS; do
		ls "$dir/debs/$p"_*.deb >/dev/null 2>&1 || echo "$p"
	done
}
download() {
	echo "hack/vm: downloading $*" >&2
	(cd "$dir/debs" && apt-get download "$@" 2>&1 |
		grep -v 'Download is performed unsandboxed' >&2) || true
}
missing=$(missing_debs)
if [ -n "$missing" ]; then
	# shellcheck disable=SC2086 # word splitting of the package list is wanted
	download $missing
	missing=$(missing_debs)
	if [ -n "$missing" ]; then # stale package lists: update once, retry
		apt-get update -qq >&2 || true
		# shellcheck disable=SC2086
		download $missing
		missing=$(missing_debs)
	fi
	[ -z "$missing" ] || die "download failed: $(echo $missing)"
fi

if [ ! -d "$dir/kernel/lib/modules/$kver" ]; then
	rm -rf "$dir/kernel"
	mkdir -p "$dir/kernel"
	dpkg -x "$dir/debs/$kpkg"_*.deb "$dir/kernel"
fi
if [ "$(cat "$dir/userland/.pkgs" 2>/dev/null)" != "$stamp" ]; then
	rm -rf "$dir/userland"
	mkdir -p "$dir/userland"
	for deb in "$dir"/debs/*.deb; do
		case $(basename "$deb") in linux-image-*) continue ;; esac
		dpkg -x "$deb" "$dir/userland"
	done
	echo "$stamp" >"$dir/userland/.pkgs"
fi
[ -e "$dir/kernel/boot/vmlinuz-$kver" ] || die "no vmlinuz-$kver in $kpkg"
echo "$kver" >"$dir/kernel-version"
echo "$stamp" >"$dir/.fetched"
ln -sfn "$kver" "$SY_VM_ROOT/current"
echo "$dir"
