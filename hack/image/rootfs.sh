#!/usr/bin/env bash
# rootfs.sh OUT.tar PACKAGES-FILE [MMDEBSTRAP-ARGS...]: a minimal Debian root filesystem
# with the packages listed in PACKAGES-FILE (one per line, # comments), as a
# tar file, built by mmdebstrap from the Debian package mirror. The release is
# bookworm unless the file has a "# suite: NAME" line (an e2e image that
# needs a newer tool than bookworm has).
#
# Both image builds use it: `make image` (hack/image/build.sh, on the host)
# and deploy/Containerfile (in its first stage), so both images hold the same
# files. Documentation, man pages, locales and apt's package lists are left
# out, as Debian's -slim images do. SOURCE_DATE_EPOCH (default: the newest
# commit's time) makes the result reproducible for one state of the mirror.
# mmdebstrap copies the build machine's /etc/hostname and /etc/resolv.conf
# into the root (in a container build: the build container's); they are
# removed, as the container runtime mounts its own over them anyway.
#
# ARCH (default: this machine's) is the Debian architecture of the root. A
# foreign one (arm64 on an amd64 host) is built the same way, its maintainer
# scripts running under qemu-user-static: mmdebstrap runs inside
# $BINFMTNS (hack/binfmtns), a user namespace with a binfmt_misc of its own,
# so the host's binfmt_misc is left alone. (deploy/Containerfile builds each
# architecture on a base image of that architecture instead, so there the
# architecture is always the native one.)
#
# Environment: DEBIAN_MIRROR (http://deb.debian.org), MMDEBSTRAP_MODE (auto),
# ARCH, BINFMTNS (a built hack/binfmtns, needed only for a foreign ARCH).
set -euo pipefail
out="$1"; pkgfile="$2"; shift 2
host_arch="$(dpkg --print-architecture)"
arch="${ARCH:-$host_arch}"
wrap=()
if [ "$arch" != "$host_arch" ]; then
  wrap=("${BINFMTNS:?ARCH=$arch is foreign: set BINFMTNS to a built hack/binfmtns}" -arch "$arch" --)
  # Only `make image` builds a foreign root: its emulator and mmdebstrap's
  # architecture check are installed here, not for every test run.
  command -v qemu-aarch64-static >/dev/null && command -v arch-test >/dev/null || {
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static arch-test
  }
fi
mirror="${DEBIAN_MIRROR:-http://deb.debian.org}"
pkgs="$(sed 's/#.*//' "$pkgfile" | xargs | tr ' ' ',')"
suite="$(sed -n 's/^# suite: *\([a-z]*\).*/\1/p' "$pkgfile" | head -n1)"
suite="${suite:-bookworm}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$(dirname "$0")" log -1 --format=%ct 2>/dev/null || echo 0)}"
"${wrap[@]}" mmdebstrap --quiet --architectures="$arch" --mode="${MMDEBSTRAP_MODE:-auto}" --variant=essential --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr --include="$pkgs" \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --aptopt='Acquire::Languages "none"' \
  "$@" \
  --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/log/*' \
  --customize-hook='rm -f "$1"/etc/hostname "$1"/etc/resolv.conf' \
  "$suite" "$out" \
  "deb $mirror/debian $suite main" \
  "deb $mirror/debian $suite-updates main" \
  "deb $mirror/debian-security $suite-security main"
