#!/usr/bin/env bash
# build-tools.sh: build the third-party binaries switchyard's e2e tests, demo
# and local node run against, each from a pinned module under hack/tools:
#   hack/tools             kube-apiserver kubectl etcd kube-proxy kubelet
#                          kube-controller-manager kube-scheduler agnhost
#                          kubemark (its --morph=proxy is the hollow proxy)
#                          (Kubernetes v1.37.1, etcd v3.7)
#   hack/tools/containerd  containerd containerd-shim-runc-v2 ctr
#   hack/tools/runc        runc (cgo, seccomp: needs libseccomp-dev)
#   hack/tools/coredns     coredns
#   hack/tools/helm        helm (lints and renders deploy/helm/switchyard)
#   hack/tools/e2e         e2e.test (upstream's e2e suite, `go test -c`), ginkgo,
#                          regression-issue-74839 (an e2e image's program)
#
# Binaries are cached outside the repository, keyed on the go.mod and go.sum
# of the module they come from, so a second run (or a second checkout) does
# not rebuild, and a bump of one module rebuilds only its own tools:
#   ${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/tools/<sha>/bin
# The Kubernetes module keeps the key it always had, so existing caches stay
# valid. With one module involved, the last line of stdout is its bin
# directory; with several, one "TOOL=PATH" line per tool.
#
# Usage: hack/build-tools.sh [TOOL...]   (default: kube-apiserver kubectl etcd)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"

# module_of TOOL: the module directory (relative to hack/tools) a tool is
# built from.
module_of() {
  case "$1" in
    kube-apiserver|kube-proxy|kubectl|etcd|kubelet|kube-controller-manager|kube-scheduler|agnhost|kubemark) echo . ;;
    containerd|containerd-shim-runc-v2|ctr) echo containerd ;;
    runc) echo runc ;;
    coredns) echo coredns ;;
    helm) echo helm ;;
    e2e.test|ginkgo|regression-issue-74839) echo e2e ;;
    *) echo "build-tools.sh: unknown tool $1" >&2; return 1 ;;
  esac
}

pkg_of() {
  case "$1" in
    kube-apiserver|kube-proxy|kubectl|kubelet|kube-controller-manager|kube-scheduler|kubemark) echo "k8s.io/kubernetes/cmd/$1" ;;
    agnhost) echo k8s.io/kubernetes/test/images/agnhost ;;
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    containerd|containerd-shim-runc-v2|ctr) echo "github.com/containerd/containerd/v2/cmd/$1" ;;
    runc) echo github.com/opencontainers/runc ;;
    coredns) echo github.com/coredns/coredns ;;
    helm) echo helm.sh/helm/v3/cmd/helm ;;
    e2e.test) echo k8s.io/kubernetes/test/e2e ;;
    regression-issue-74839) echo k8s.io/kubernetes/test/images/regression-issue-74839 ;;
    ginkgo) echo github.com/onsi/ginkgo/v2/ginkgo ;;
  esac
}

# bindir_of MODDIR: the cache directory for one module's binaries.
bindir_of() {
  local dir="$root/hack/tools/$1"
  echo "$cache/tools/$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)/bin"
}

# modver MODDIR MODULE: the version a module pins.
modver() {
  awk -v m="$2" '$1==m{print $2; exit} $1=="require" && $2==m{print $3; exit}' "$root/hack/tools/$1/go.mod"
}

# build_env TOOL: prints "CGO TAGS LDFLAGS" (separated by |) for one tool.
build_env() {
  local v minor ldflags="-s -w" p
  case "$(module_of "$1")" in
    .|e2e)
      v="$(modver . k8s.io/kubernetes)"; minor="$(echo "$v" | cut -d. -f2)"
      for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor"
        ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
      done
      printf '0||%s\n' "$ldflags" ;;
    containerd)
      v="$(modver containerd github.com/containerd/containerd/v2)"
      printf '0||%s\n' "$ldflags -X github.com/containerd/containerd/v2/version.Version=${v#v}" ;;
    runc)
      v="$(modver runc github.com/opencontainers/runc)"
      printf '1|seccomp|%s\n' "$ldflags -X main.version=${v#v}" ;;
    coredns) printf '0||%s\n' "$ldflags" ;;
    helm)
      v="$(modver helm helm.sh/helm/v3)"
      printf '0||%s\n' "$ldflags -X helm.sh/helm/v3/internal/version.version=$v" ;;
  esac
}

build() {
  local t="$1" mod bindir pkg cgo tags ldflags start
  mod="$(module_of "$t")"; bindir="$(bindir_of "$mod")"; pkg="$(pkg_of "$t")"
  mkdir -p "$bindir"
  if [ -x "$bindir/$t" ]; then
    echo "build-tools: $t cached ($bindir/$t)" >&2
    return
  fi
  IFS='|' read -r cgo tags ldflags < <(build_env "$t")
  start=$(date +%s)
  echo "build-tools: building $t ($pkg, module hack/tools/$mod)" >&2
  local gocmd=(build)
  [ "$t" != e2e.test ] || gocmd=(test -c)
  (cd "$root/hack/tools/$mod" && CGO_ENABLED="$cgo" go "${gocmd[@]}" -trimpath -tags "$tags" \
    -ldflags "$ldflags" -o "$bindir/$t.tmp" "$pkg")
  mv "$bindir/$t.tmp" "$bindir/$t"
  echo "build-tools: $t built in $(( $(date +%s) - start ))s" >&2
}

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(kube-apiserver kubectl etcd)
mods=()
for t in "${targets[@]}"; do
  build "$t"
  mods+=("$(module_of "$t")")
done
if [ "$(printf '%s\n' "${mods[@]}" | sort -u | wc -l)" -eq 1 ]; then
  bindir_of "${mods[0]}"
else
  for t in "${targets[@]}"; do echo "$t=$(bindir_of "$(module_of "$t")")/$t"; done
fi
