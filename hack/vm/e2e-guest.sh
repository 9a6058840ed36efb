#!/bin/sh
# e2e-guest.sh [e2e.test flags...]
#
# The guest half of e2e-ipvs.sh: vmtest.sh runs it as root in /t, next to
# the static binaries and kubeconfig e2e-ipvs.sh put there, and returns its
# exit status. It brings up the guest's only network link (QEMU user
# networking, restrict=on: the one reachable address is the guestfwd
# 10.0.2.100:$SY_API_PORT, the host's loopback apiserver), exposes that
# again at 127.0.0.1:$SY_API_PORT with nsforward so the kubeconfig and the
# apiserver's certificate (issued for 127.0.0.1) work unchanged, and execs
# e2e.test. busybox sh runs its own applets before $PATH, so iproute2 is
# called as /bin/ip here (the Go framework finds it through $PATH).
set -eu
: "${SY_API_PORT:?set by e2e-ipvs.sh}"

for m in virtio_pci virtio_net br_netfilter; do modprobe "$m"; done
/bin/ip addr add 10.0.2.15/24 dev eth0
/bin/ip link set eth0 up

./nsforward -netns /proc/1/ns/net -listen "127.0.0.1:$SY_API_PORT" \
	-target "10.0.2.100:$SY_API_PORT" >/tmp/apiforward.log 2>&1 &
tries=0
until grep -q "listening on" /tmp/apiforward.log; do
	tries=$((tries + 1))
	if [ "$tries" -gt 200 ]; then
		echo "e2e-guest: nsforward did not start:" >&2
		cat /tmp/apiforward.log >&2
		exit 1
	fi
	sleep 0.1
done
echo "e2e-guest: apiserver at 127.0.0.1:$SY_API_PORT, uptime $(cut -d' ' -f1 /proc/uptime)s"
exec ./e2e.test "$@"
