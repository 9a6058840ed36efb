#!/usr/bin/env bash
# install-deps.sh: install the Debian packages the tests and the demo use,
# if they are missing (iptables, nftables, ipset, conntrack, prometheus, iproute2,
# curl, openssl, qemu for the IPVS VM). Needs root; does nothing when all
# are present.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for pair in iptables:iptables nft:nftables ipset:ipset conntrack:conntrack prometheus:prometheus ip:iproute2 \
  curl:curl openssl:openssl qemu-system-x86_64:qemu-system-x86; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}" >&2
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
