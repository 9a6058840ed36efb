#!/usr/bin/env bash
# install-deps.sh: install the Debian packages the tests, the demo and the
# local node use, if they are missing: iptables, nftables, ipset, conntrack,
# prometheus, iproute2, curl, openssl, qemu (the IPVS VM); mmdebstrap (image
# root filesystems), busybox-static (the busybox e2e image), the CNI plugins
# and libseccomp-dev (runc with seccomp) for hack/cluster. Needs root; does
# nothing when all are present.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
# Each pair is "a file or command that shows the package is there:package".
for pair in iptables:iptables nft:nftables ipset:ipset conntrack:conntrack prometheus:prometheus ip:iproute2 \
  curl:curl openssl:openssl qemu-system-x86_64:qemu-system-x86 mmdebstrap:mmdebstrap \
  /bin/busybox:busybox-static /usr/lib/cni/bridge:containernetworking-plugins \
  /usr/include/seccomp.h:libseccomp-dev gcc:gcc; do
  probe="${pair%%:*}"
  if [ "${probe#/}" != "$probe" ]; then [ -e "$probe" ] && continue
  else command -v "$probe" >/dev/null 2>&1 && continue; fi
  need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
