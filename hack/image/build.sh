#!/usr/bin/env bash
# build.sh IMAGE...: build container images on this machine, with no engine
# and no registry, as archives that `ctr images import` and `podman load`
# read (docker-archive; switchyard's: oci-archive). Prints one "IMAGE=PATH"
# line per image on stdout.
#
#   switchyard  localhost/switchyard:$VERSION for every architecture of
#               IMAGE_ARCHES (default "amd64 arm64"): the static daemon
#               (bin/linux-<arch>/switchyard, `make build-linux`) on a Debian
#               rootfs of that architecture with the tools it calls
#               (hack/image/switchyard.packages), and an SPDX SBOM of each
#               (hack/ociimage sbom). Written to _output/images/switchyard-$VERSION.tar,
#               an oci-archive: an image index of the architectures, each
#               SBOM an OCI artifact whose subject is its image; the SBOMs
#               also beside it as switchyard-$VERSION.linux-<arch>.spdx.json.
#   pause       registry.k8s.io/pause:<tag>: upstream's pause.c, built static
#   busybox     registry.k8s.io/e2e-test-images/busybox:<tag>: Debian's busybox-static
#   agnhost     registry.k8s.io/e2e-test-images/agnhost:<tag>: agnhost on a Debian
#               rootfs with the tools upstream's image carries (agnhost.packages)
#               and CoreDNS at /coredns, as upstream's has
#   coredns     registry.k8s.io/coredns/coredns:v<version>
#   kube-proxy  localhost/kube-proxy:<version>: upstream kube-proxy from hack/tools
#               on the same rootfs as switchyard's image, for side-by-side runs
# and the other images upstream's [sig-network] tests name (conformance runs):
#   glibc-dns-testing      dig on Debian, plus /coredns
#   nginx                  Debian's nginx, in the foreground
#   regression-issue-74839 its test program (hack/tools/e2e)
#   distroless-iptables    switchyard's rootfs (iptables, conntrack) as is
# The e2e tags are read from the pinned Kubernetes module's
# test/utils/image/manifest.go, so they are the names the e2e framework asks for.
#
# Root filesystems (mmdebstrap, ~1 min each; a foreign architecture's runs
# its maintainer scripts under qemu-user-static, in hack/binfmtns) and the
# third-party images are cached under
# ${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/images, keyed on what they are
# built from and their architecture; the switchyard image is rebuilt each
# time (seconds).
#
# Environment: VERSION (default: git describe), SOURCE_DATE_EPOCH, IMAGE_ARCHES.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/hack/image"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/images"
VERSION="${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"
IMAGE_ARCHES="${IMAGE_ARCHES:-amd64 arm64}"
host_arch="$(dpkg --print-architecture)"
mkdir -p "$cache" "$root/_output/images"

log() { echo "image: $*" >&2; }
key() { cat "$@" | sha256sum | cut -c1-16; }
k8s_dir() {
  local v; v="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$root/hack/tools/go.mod")"
  (cd "$root/hack/tools" && go mod download k8s.io/kubernetes >/dev/null)
  echo "$(go env GOMODCACHE)/k8s.io/kubernetes@$v"
}

# e2e_tag KEY: the tag test/utils/image/manifest.go gives the image configs[KEY].
e2e_tag() {
  local tag
  tag="$(sed -n "s/.*configs\[$1\] = Config{list\.[A-Za-z0-9]*, \"[^\"]*\", \"\([^\"]*\)\"}.*/\1/p" \
    "$(k8s_dir)/test/utils/image/manifest.go" | head -n1)"
  [ -n "$tag" ] || { log "no configs[$1] in the e2e image manifest"; return 1; }
  echo "$tag"
}

# ociimage ARGS...: run hack/ociimage (built from this checkout).
ociimage() {
  (cd "$root" && go build -o "$cache/ociimage" ./hack/ociimage)
  "$cache/ociimage" "$@"
}

# rootfs NAME PKGFILE [MMDEBSTRAP-ARGS...]: cached rootfs tar of one package
# list, for this machine's architecture.
rootfs() { rootfs_arch "$host_arch" "$@"; }

# rootfs_arch ARCH NAME PKGFILE [MMDEBSTRAP-ARGS...]: the same for ARCH (a
# Debian architecture name).
rootfs_arch() {
  local arch="$1" name="$2" pkgs="$3" out; shift 3
  out="$cache/rootfs-$name-$arch-$({ echo "$arch"; printf '%s\n' "$@"; } | key "$here/rootfs.sh" "$pkgs" -).tar"
  if [ ! -s "$out" ]; then
    log "building the $name rootfs ($arch) with mmdebstrap"
    local t0=$SECONDS
    [ "$arch" = "$host_arch" ] || (cd "$root" && go build -o "$cache/binfmtns" ./hack/binfmtns)
    # mmdebstrap picks its output format from the name's extension.
    ARCH="$arch" BINFMTNS="$cache/binfmtns" "$here/rootfs.sh" "${out%.tar}.tmp.tar" "$pkgs" "$@" >&2
    mv "${out%.tar}.tmp.tar" "$out"
    log "$name rootfs ($arch) built in $((SECONDS - t0))s ($(du -m "$out" | cut -f1) MB)"
  fi
  echo "$out"
}

# The index lists the images in IMAGE_ARCHES order. Each image's SBOM is
# built from the very files of its layers: the daemon binary (its Go build
# info) and the rootfs tar (its dpkg status).
img_switchyard() {
  local out="$root/_output/images/switchyard-$VERSION.tar" tag="localhost/switchyard:$VERSION"
  local a base bin sbom args=()
  make -C "$root" build-linux VERSION="$VERSION" IMAGE_ARCHES="$IMAGE_ARCHES" >&2
  for a in $IMAGE_ARCHES; do
    base="$(rootfs_arch "$a" switchyard "$here/switchyard.packages")"
    bin="$root/bin/linux-$a/switchyard"
    sbom="$root/_output/images/switchyard-$VERSION.linux-$a.spdx.json"
    ociimage sbom -o "$sbom" -image "$tag" -arch "$a" -binary "$bin" -rootfs "$base"
    args+=(-arch "$a" -layer "$a=$base" -file "$a=$bin:/usr/local/bin/switchyard:0755" -sbom "$a=$sbom")
  done
  ociimage index -o "$out" -tag "$tag" "${args[@]}" -entrypoint '["/usr/local/bin/switchyard"]'
  echo "$out"
}

img_pause() {
  local tag src out; tag="$(e2e_tag Pause)"; src="$(k8s_dir)/build/pause/linux/pause.c"
  out="$cache/pause-$tag-$(key "$src" "$0").tar"
  if [ ! -s "$out" ]; then
    gcc -Os -Wall -static -DVERSION="v$tag" -o "$cache/pause" "$src"
    ociimage -o "$out" -tag "registry.k8s.io/pause:$tag" -file "$cache/pause:/pause:0755" \
      -entrypoint '["/pause"]'
  fi
  echo "$out"
}

img_busybox() {
  local tag out bb=/bin/busybox; tag="$(e2e_tag BusyBox)"
  [ -x "$bb" ] || { log "busybox-static is not installed (hack/install-deps.sh)"; return 1; }
  out="$cache/busybox-$tag-$(key "$bb" "$0").tar"
  if [ ! -s "$out" ]; then
    local args=(-file "$bb:/bin/busybox:0755" -dir /tmp:1777 -dir /etc -dir /root:0700)
    local applet
    for applet in $("$bb" --list); do
      [ "$applet" = busybox ] || args+=(-symlink "/bin/$applet:busybox")
    done
    ociimage -o "$out" -tag "registry.k8s.io/e2e-test-images/busybox:$tag" "${args[@]}" -cmd '["sh"]'
  fi
  echo "$out"
}

img_agnhost() {
  local tag bin base out porter coredns pause registry; tag="$(e2e_tag Agnhost)"
  bin="$("$root/hack/build-tools.sh" agnhost | tail -n1)/agnhost"
  # The e2e tests for supplemental groups expect this user and these groups.
  base="$(rootfs agnhost "$here/agnhost.packages" \
    --customize-hook='echo "user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh" >>"$1/etc/passwd"' \
    --customize-hook='echo "user-defined-in-image:x:1000:" >>"$1/etc/group"' \
    --customize-hook='echo "group-defined-in-image:x:50000:user-defined-in-image" >>"$1/etc/group"')"
  porter="$(k8s_dir)/test/images/agnhost/porter"
  # Upstream's image carries a CoreDNS binary at /coredns: the DNS tests run
  # their own upstream name servers with it.
  coredns="$("$root/hack/build-tools.sh" coredns | tail -n1)/coredns"
  # fake-registry-server serves /var/registry; upstream fills it with
  # registry.k8s.io's pause image, here it is the local one (the
  # LocalhostNodePorts spec pulls pause:testing through a NodePort).
  pause="$(img_pause)"
  registry="$cache/registry-pause-$(key "$pause").tar"
  [ -s "$registry" ] || ociimage registry -i "$pause" -image pause -tag testing -o "$registry"
  out="$cache/agnhost-$tag-$(key "$bin" "$base" "$coredns" "$registry" "$0").tar"
  if [ ! -s "$out" ]; then
    ociimage -o "$out" -tag "registry.k8s.io/e2e-test-images/agnhost:$tag" -layer "$base" -layer "$registry" \
      -file "$bin:/agnhost:0755" -symlink /agnhost-2:agnhost -dir /uploads \
      -file "$coredns:/coredns:0755" \
      -file "$porter/localhost.crt:/localhost.crt:0644" -file "$porter/localhost.key:/localhost.key:0600" \
      -entrypoint '["/agnhost"]' -cmd '["pause"]'
  fi
  echo "$out"
}

img_coredns() {
  local bin v out
  bin="$("$root/hack/build-tools.sh" coredns | tail -n1)/coredns"
  v="$(awk '$1=="require" && $2=="github.com/coredns/coredns"{print $3}' "$root/hack/tools/coredns/go.mod")"
  out="$cache/coredns-$v-$(key "$bin" "$0").tar"
  if [ ! -s "$out" ]; then
    ociimage -o "$out" -tag "registry.k8s.io/coredns/coredns:$v" -file "$bin:/coredns:0755" \
      -entrypoint '["/coredns"]'
  fi
  echo "$out"
}

img_kube-proxy() {
  local bin v base out
  bin="$("$root/hack/build-tools.sh" kube-proxy | tail -n1)/kube-proxy"
  v="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$root/hack/tools/go.mod")"
  base="$(rootfs switchyard "$here/switchyard.packages")"
  out="$cache/kube-proxy-$v-$(key "$bin" "$base" "$0").tar"
  if [ ! -s "$out" ]; then
    ociimage -o "$out" -tag "localhost/kube-proxy:$v" -layer "$base" \
      -file "$bin:/usr/local/bin/kube-proxy:0755" -entrypoint '["/usr/local/bin/kube-proxy"]'
  fi
  echo "$out"
}

# e2e_image KEY NAME OUT-PREFIX ARGS...: cached image registry.k8s.io/.../NAME:tag
# of configs[KEY], built by ociimage ARGS (inputs hashed: the ARGS' files).
e2e_image() {
  local k="$1" name="$2" reg="$3" tag out; shift 3
  tag="$(e2e_tag "$k")"
  out="$cache/$name-$tag-$(printf '%s\n' "$@" | key "$0" -).tar"
  if [ ! -s "$out" ]; then
    ociimage -o "$out" -tag "$reg/$name:$tag" "$@"
  fi
  echo "$out"
}

img_glibc-dns-testing() {
  local base coredns
  base="$(rootfs glibc-dns-testing "$here/glibc-dns-testing.packages")"
  coredns="$("$root/hack/build-tools.sh" coredns | tail -n1)/coredns"
  e2e_image GlibcDnsTesting glibc-dns-testing registry.k8s.io/e2e-test-images -layer "$base" \
    -file "$coredns:/coredns:0755" -cmd '["bash"]'
}

img_nginx() {
  e2e_image Nginx nginx registry.k8s.io/e2e-test-images \
    -layer "$(rootfs nginx "$here/nginx.packages")" -cmd '["nginx", "-g", "daemon off;"]'
}

img_regression-issue-74839() {
  local bin; bin="$("$root/hack/build-tools.sh" regression-issue-74839 | tail -n1)/regression-issue-74839"
  e2e_image RegressionIssue74839 regression-issue-74839 registry.k8s.io/e2e-test-images \
    -layer "$(rootfs switchyard "$here/switchyard.packages")" \
    -file "$bin:/regression-issue-74839:0755" -entrypoint '["/regression-issue-74839"]'
}

img_distroless-iptables() {
  e2e_image DistrolessIptables distroless-iptables registry.k8s.io/build-image \
    -layer "$(rootfs switchyard "$here/switchyard.packages")"
}

E2E_IMAGES="glibc-dns-testing nginx regression-issue-74839 distroless-iptables"
[ $# -gt 0 ] || { echo "usage: $0 switchyard|pause|busybox|agnhost|coredns|kube-proxy|${E2E_IMAGES// /|}..." >&2; exit 2; }
for img in "$@"; do
  case "$img" in
    switchyard|pause|busybox|agnhost|coredns|kube-proxy|glibc-dns-testing|nginx|regression-issue-74839|distroless-iptables) path="$("img_$img")"; echo "$img=$path" ;;
    *) echo "build.sh: unknown image $img" >&2; exit 2 ;;
  esac
done
