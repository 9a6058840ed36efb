#!/bin/sh
# build-base.sh [DIR]
#
# Builds DIR/base.cpio (the initramfs every test VM starts from) and
# DIR/vmlinuz from what fetch-deps.sh unpacked into DIR (default: the
# cache's vm/current). The image holds static busybox, the kernel modules
# switchyard needs (IPVS and its schedulers, dummy, veth, netfilter, ipset;
# bridge, br_netfilter and virtio-net for the e2e run) with a fresh
# modules.dep so the kernel auto-loads them, and Debian's iptables (nft and
# legacy), ipset, ipvsadm, conntrack and iproute2's ip with their
# libraries. It depends only on DIR, so it is cached there: it is rebuilt
# only when missing or older than this script.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

dir=${1:-$SY_VM_ROOT/current}
dir=$(cd "$dir" && pwd -P) || die "no VM directory $dir: run fetch-deps.sh"
[ -e "$dir/.fetched" ] || die "$dir is incomplete: run fetch-deps.sh"
if [ -e "$dir/base.cpio" ] && [ -e "$dir/vmlinuz" ] && [ "$dir/base.cpio" -nt "$0" ]; then
	echo "$dir/base.cpio"
	exit 0
fi

kver=$(cat "$dir/kernel-version")
km=$dir/kernel/lib/modules/$kver
bb=$dir/userland/bin/busybox # static: also our depmod and cpio on the host
root=$(mktemp -d "${TMPDIR:-/tmp}/sy-vm-base.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/proc" "$root/sys" \
	"$root/dev" "$root/tmp" "$root/run" "$root/etc" "$root/root" "$root/lib/modules/$kver"
cp "$bb" "$root/bin/busybox"
mkdir -p "$root/var"
ln -s ../run "$root/var/run"

# --- kernel modules and everything they depend on -------------------------
MODULES="ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_wlc ip_vs_dh ip_vs_sh ip_vs_sed ip_vs_nq ip_vs_mh
	dummy veth nf_conntrack nf_nat nf_conntrack_netlink nfnetlink xfrm_user
	x_tables ip_tables iptable_filter iptable_nat iptable_mangle iptable_raw
	ip6_tables ip6table_filter ip6table_nat ip6table_mangle ip6table_raw
	xt_comment xt_mark xt_conntrack xt_MASQUERADE xt_nat xt_addrtype xt_multiport xt_tcpudp
	xt_set xt_ipvs xt_statistic xt_recent xt_REDIRECT xt_CT ipt_REJECT ip6t_REJECT
	nf_tables nft_compat nft_chain_nat nft_ct nft_nat nft_masq nft_redir nft_reject nft_numgen
	nft_reject_inet nft_reject_ipv4 nft_reject_ipv6 nft_fib_inet nft_fib_ipv4 nft_fib_ipv6
	ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip ip_set_hash_ipportnet
	ip_set_hash_net ip_set_bitmap_port
	bridge br_netfilter virtio_pci virtio_net"
[ -e "$km/modules.dep" ] || "$bb" depmod -b "$dir/kernel" "$kver"
# modules.dep lines are "kernel/x/y.ko: kernel/dep1.ko kernel/dep2.ko"
# (already transitively closed by depmod).
list=$root/.modlist
for m in $MODULES; do
	awk -F: -v want="$m" '{
		base = $1; sub(".*/", "", base); sub("\\.ko.*$", "", base); gsub("-", "_", base)
		if (base == want) { print $1; n = split($2, d, " "); for (i = 1; i <= n; i++) print d[i]; found = 1; exit }
	} END { if (!found) exit 1 }' "$km/modules.dep" >>"$list" ||
		grep -q "/$m.ko" "$km/modules.builtin" || echo "hack/vm: module $m not found, skipped" >&2
done
sort -u "$list" | while read -r p; do
	mkdir -p "$root/lib/modules/$kver/$(dirname "$p")"
	cp "$km/$p" "$root/lib/modules/$kver/$p"
done
rm -f "$list"
cp "$km/modules.builtin" "$km/modules.order" "$root/lib/modules/$kver/" 2>/dev/null || true
"$bb" depmod -b "$root" "$kver"

# --- Debian's netfilter tools with the libraries they load ---------------
u=$dir/userland
libpath=$u/usr/lib/x86_64-linux-gnu:$u/lib/x86_64-linux-gnu
mkdir -p "$root/lib64" "$root/usr/lib/x86_64-linux-gnu"
# copy_libs FILE: the shared libraries FILE loads, into the image.
copy_libs() {
	LD_LIBRARY_PATH=$libpath ldd "$1" | awk '/=> \//{print $3} /^\t\/lib64/{print $1}' |
		while read -r lib; do
			case $lib in "$u"/*) rel=${lib#"$u"/} ;; *) rel=${lib#/} ;; esac
			mkdir -p "$root/$(dirname "$rel")"
			cp -L "$lib" "$root/$rel"
		done
}
for b in usr/sbin/xtables-nft-multi usr/sbin/xtables-legacy-multi sbin/ipvsadm usr/sbin/ipvsadm \
	sbin/ipset usr/sbin/ipset usr/sbin/conntrack bin/ip; do
	[ -e "$u/$b" ] || continue
	mkdir -p "$root/$(dirname "$b")"
	cp -P "$u/$b" "$root/$b"
	copy_libs "$u/$b"
done
cp -a "$u/usr/lib/x86_64-linux-gnu/xtables" "$root/usr/lib/x86_64-linux-gnu/"
# iptables dlopens its extensions: their own libraries (libxt_statistic
# needs libm) are not among the binaries'.
for ext in "$u"/usr/lib/x86_64-linux-gnu/xtables/*.so; do copy_libs "$ext"; done
cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
# dpkg -x runs no postinst: make the update-alternatives links by hand.
for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
	ln -sf xtables-nft-multi "$root/usr/sbin/$t"
	fam=${t%%-*}
	ln -sf xtables-nft-multi "$root/usr/sbin/$fam-nft${t#"$fam"}"
	ln -sf xtables-legacy-multi "$root/usr/sbin/$fam-legacy${t#"$fam"}"
done
# iproute2's ip (`ip netns`) shadows busybox's in every PATH directory:
# `busybox --install -s` in the guest does not replace existing files.
for d in sbin usr/sbin usr/bin; do ln -sf /bin/ip "$root/$d/ip"; done
if [ -d "$u/etc/iproute2" ]; then cp -a "$u/etc/iproute2" "$root/etc/"; fi
for f in /etc/protocols /etc/services /etc/ethertypes; do
	if [ -e "$f" ]; then cp "$f" "$root/etc/"; fi
done
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"

(cd "$root" && find . | LC_ALL=C sort | "$bb" cpio -o -H newc 2>/dev/null) >"$dir/base.cpio.tmp"
mv "$dir/base.cpio.tmp" "$dir/base.cpio"
cp "$dir/kernel/boot/vmlinuz-$kver" "$dir/vmlinuz"
echo "hack/vm: base.cpio $(du -h "$dir/base.cpio" | cut -f1), $(find "$root/lib/modules" -name '*.ko*' | wc -l) modules" >&2
echo "$dir/base.cpio"
