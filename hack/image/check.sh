#!/usr/bin/env bash
# check.sh ARCHIVE: check switchyard's image archive from `make image`
# (hack/image/build.sh switchyard), as `make image` does after building it:
#  1. `ociimage check`: index.json names one image index; it lists an image
#     for linux/amd64 and linux/arm64 and, for each, an SPDX SBOM artifact
#     whose subject is that image; every blob hashes to its digest; each SBOM
#     parses and validates (spdx/tools-golang). Prints sizes and SBOM counts.
#  2. For every architecture: its file system extracted, then
#     `switchyard --version` (must print the image's VERSION), `iptables
#     --version`, `iptables-legacy --version` and `ip -V` run in it by chroot;
#     a foreign architecture's binaries under qemu-user-static, through a
#     binfmt_misc private to hack/binfmtns (the host's stays untouched).
#     qemu-user has no NETLINK_NETFILTER sockets, so under it the nf_tables
#     `iptables` stops at its netlink socket with "Protocol not supported":
#     that, and only that, failure is accepted there; the legacy iptables,
#     which needs no socket for --version, must print its version.
#     (hack/image/boot-arm64.sh, also run by `make image`, runs the arm64
#     nf_tables iptables against a real arm64 kernel.)
# Environment: VERSION (what switchyard --version must print; default: the
# archive's tag), SWITCHYARD_CACHE.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/images"
archive="${1:?usage: check.sh ARCHIVE}"
host_arch="$(dpkg --print-architecture)"
mkdir -p "$cache"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/ociimage" ./hack/ociimage && go build -o "$tmp/binfmtns" ./hack/binfmtns)

"$tmp/ociimage" check "$archive" | tee "$tmp/summary"
ref="$(head -n1 "$tmp/summary" | cut -d' ' -f1)"
want="switchyard ${VERSION:-${ref##*:}}"

# run ARCH ROOT CMD...: CMD in ROOT by chroot, under qemu for a foreign ARCH.
run() { local arch="$1" dir="$2"; shift 2; "$tmp/binfmtns" -arch "$arch" -- chroot "$dir" "$@" 2>&1; }

fail=0
for platform in $(sed -n 's/^  \(linux\/[a-z0-9]*\) manifest.*/\1/p' "$tmp/summary"); do
  arch="${platform#linux/}" dir="$tmp/$arch"
  mkdir "$dir"
  # /dev's nodes are left out: the chroot needs none of them.
  "$tmp/ociimage" extract -platform "$platform" "$archive" | tar -C "$dir" -xf - --exclude='dev/*'
  how="natively"; [ "$arch" = "$host_arch" ] || how="under qemu-user-static"
  echo "check: $platform, $how"
  got="$(run "$arch" "$dir" /usr/local/bin/switchyard --version)" || true
  echo "  \$ switchyard --version: $got"
  [ "$got" = "$want" ] || { echo "check: want \"$want\"" >&2; fail=1; }
  rc=0; got="$(run "$arch" "$dir" /usr/sbin/iptables --version)" || rc=$?
  echo "  \$ iptables --version (exit $rc): $got"
  if [ "$rc" -ne 0 ]; then
    if [ "$arch" = "$host_arch" ] || [ "$got" != "iptables: Failed to initialize nft: Protocol not supported" ]; then
      echo "check: iptables failed" >&2; fail=1
    else
      echo "    (qemu-user cannot open NETLINK_NETFILTER sockets: the aarch64 iptables ran up to its first one)"
    fi
  fi
  for c in "/usr/sbin/iptables-legacy --version" "/usr/sbin/ip -V"; do
    rc=0; got="$(run "$arch" "$dir" $c)" || rc=$?
    echo "  \$ ${c#/usr/sbin/} (exit $rc): $got"
    [ "$rc" -eq 0 ] || fail=1
  done
done
[ "$fail" -eq 0 ] || { echo "check: FAILED" >&2; exit 1; }
echo "check: OK"
