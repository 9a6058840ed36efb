# Shared settings of the hack/vm scripts (sourced, not run).
#
# The VM cache lives under ${SWITCHYARD_CACHE:-$HOME/.cache/switchyard}/vm:
#   vm/<kernel-version>/debs      downloaded .deb files (apt-get download)
#   vm/<kernel-version>/kernel    dpkg -x of the kernel package
#   vm/<kernel-version>/userland  dpkg -x of busybox-static, iptables, ipset, ...
#   vm/<kernel-version>/base.cpio initramfs base (build-base.sh)
#   vm/<kernel-version>/vmlinuz   the kernel image
#   vm/current                    symlink to the kernel directory in use
# Nothing is installed on the host except qemu-system-x86 (if missing).

SY_CACHE=${SWITCHYARD_CACHE:-${HOME:-/root}/.cache/switchyard}
SY_VM_ROOT=$SY_CACHE/vm

# The kernel flavour: Debian's cloud kernel boots quickly under TCG and
# has IPVS, dummy, veth, netfilter and ipset as modules.
SY_KERNEL_META=${SWITCHYARD_VM_KERNEL_META:-linux-image-cloud-amd64}

# Userland packages: static busybox (init, shell, modprobe, depmod, cpio)
# plus the netfilter tools and their libraries, and iproute2 (busybox's ip
# has no `ip netns`, which the e2e framework uses) with its libraries.
# fetch-deps.sh downloads what a changed list adds.
SY_USERLAND_PKGS="busybox-static iptables ipvsadm ipset conntrack
	libip4tc2 libip6tc2 libxtables12 libmnl0 libnetfilter-conntrack3
	libnfnetlink0 libnftnl11 libnl-3-200 libnl-genl-3-200 libpopt0 libipset13
	iproute2 libbpf1 libelf1 libbsd0 libcap2 libmd0 zlib1g"

# sy_pkg_stamp is what a complete cache directory records in .fetched: the
# kernel flavour and the package list, one line, so a changed list is seen.
sy_pkg_stamp() {
	echo "$SY_KERNEL_META $SY_USERLAND_PKGS" | tr -s ' \t\n' '   ' | sed 's/ $//'
}

die() {
	echo "hack/vm: $*" >&2
	exit 1
}

# free_port: a random TCP port in 20000-39999 that nothing on the host listens
# on. Called as $(free_port) it runs in a subshell, so $taken does not keep
# the ports already handed out; three draws from 20000 rarely collide.
taken=""
free_port() {
	while :; do
		p=$(($(od -An -N2 -tu2 /dev/urandom) % 20000 + 20000))
		case " $taken " in *" $p "*) continue ;; esac
		if ! ss -Hltn "sport = :$p" | grep -q .; then
			taken="$taken $p"
			echo "$p"
			return
		fi
	done
}

# sy_host_work NAME: a scratch directory $work (with $work/t for the guest's
# binaries) removed at exit, together with the control plane of
# $cluster_run if the script started one with hack/local-up.sh.
sy_host_work() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
	cluster_run=""
	trap sy_host_cleanup EXIT
	trap 'exit 130' INT TERM
	mkdir -p "$work/t"
}

sy_host_cleanup() {
	if [ -n "$cluster_run" ]; then
		RUN_DIR=$cluster_run "$ROOT/hack/local-up.sh" down >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
