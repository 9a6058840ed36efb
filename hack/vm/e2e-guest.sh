#!/bin/sh
# e2e-guest.sh [e2e.test flags...]
#
# The guest half of e2e-ipvs.sh: vmtest.sh runs it as root in /t, next to
# the static binaries and kubeconfig e2e-ipvs.sh put there, and returns its
# exit status. It brings up the guest's only network link (QEMU user
# networking, restrict=on: the reachable addresses are the guestfwds
# 10.0.2.100:$SY_API_PORT, the host's loopback apiserver, and, when
# $SY_ETCD_PORT is set, 10.0.2.100:$SY_ETCD_PORT, its etcd), exposes each
# again at 127.0.0.1 on the same port with nsforward so the kubeconfig and
# the apiserver's certificate (issued for 127.0.0.1) work unchanged, and
# execs e2e.test. busybox sh runs its own applets before $PATH, so iproute2
# is called as /bin/ip here (the Go framework finds it through $PATH).
#
# A ./guest.env next to it (written by the host script) is sourced first:
# settings whose values hold spaces, which VM_ENV ("K=V ...") cannot carry.
set -eu
if [ -f ./guest.env ]; then . ./guest.env; fi
: "${SY_API_PORT:?set by e2e-ipvs.sh}"

for m in virtio_pci virtio_net br_netfilter; do modprobe "$m"; done
/bin/ip addr add 10.0.2.15/24 dev eth0
/bin/ip link set eth0 up

# forward PORT NAME: 127.0.0.1:PORT in the guest -> the host's loopback PORT.
forward() {
	./nsforward -netns /proc/1/ns/net -listen "127.0.0.1:$1" \
		-target "10.0.2.100:$1" >"/tmp/$2forward.log" 2>&1 &
	tries=0
	until grep -qs "listening on" "/tmp/$2forward.log"; do
		tries=$((tries + 1))
		if [ "$tries" -gt 200 ]; then
			echo "e2e-guest: nsforward for $2 did not start:" >&2
			cat "/tmp/$2forward.log" >&2
			exit 1
		fi
		sleep 0.1
	done
}
forward "$SY_API_PORT" api
echo "e2e-guest: apiserver at 127.0.0.1:$SY_API_PORT, uptime $(cut -d' ' -f1 /proc/uptime)s"
if [ -n "${SY_ETCD_PORT:-}" ]; then
	forward "$SY_ETCD_PORT" etcd
	echo "e2e-guest: etcd at 127.0.0.1:$SY_ETCD_PORT"
fi
exec ./e2e.test "$@"
