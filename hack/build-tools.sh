#!/usr/bin/env bash
# build-tools.sh: build the control-plane binaries switchyard's e2e tests and
# demo run against (kube-apiserver, kubectl, etcd, and upstream kube-proxy for
# side-by-side benchmarks) from the pinned tools module in hack/tools.
#
# Binaries are cached outside the repository, keyed on the tools module's
# go.sum, so a second run (or a second checkout) does not rebuild:
#   ${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/tools/<sha>/bin
# Prints the bin directory on the last line of stdout.
#
# Usage: hack/build-tools.sh [kube-apiserver] [kubectl] [etcd] [kube-proxy]
#        (default: kube-apiserver kubectl etcd)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/hack/tools"
cache="${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}"
key="$(cat "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-16)"
bindir="$cache/tools/$key/bin"
mkdir -p "$bindir"

version="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' "$tools/go.mod")"
minor="$(echo "$version" | cut -d. -f2)"
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
done

pkg_of() {
  case "$1" in
    kube-apiserver) echo k8s.io/kubernetes/cmd/kube-apiserver ;;
    kube-proxy) echo k8s.io/kubernetes/cmd/kube-proxy ;;
    kubectl) echo k8s.io/kubernetes/cmd/kubectl ;;
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    *) echo "build-tools.sh: unknown tool $1" >&2; return 1 ;;
  esac
}

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(kube-apiserver kubectl etcd)
cd "$tools"
for t in "${targets[@]}"; do
  pkg="$(pkg_of "$t")"
  if [ -x "$bindir/$t" ]; then
    echo "build-tools: $t cached ($bindir/$t)" >&2
    continue
  fi
  start=$(date +%s)
  echo "build-tools: building $t ($pkg $version)" >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bindir/$t.tmp" "$pkg"
  mv "$bindir/$t.tmp" "$bindir/$t"
  echo "build-tools: $t built in $(( $(date +%s) - start ))s" >&2
done
echo "$bindir"
