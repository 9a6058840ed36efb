package conntrack

import (
	"errors"
	"io/fs"
	"net/netip"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/switchyard-proxy/switchyard/internal/sysctl"
)

// The conntrack sysctls and nf_conntrack's module parameters exist only
// once nf_conntrack is loaded. On most nodes something has loaded it
// before the proxy starts (a firewall, the container runtime's NAT rules),
// but not on all: kube-proxy then fails at start with "open
// /proc/sys/net/netfilter/nf_conntrack_max: no such file or directory"
// (distributions ship workarounds that modprobe it first). switchyard asks
// the kernel to load it instead: a conntrack netlink request for a
// subsystem that is not there makes nfnetlink request the module
// (nfnetlink-subsys-1, nf_conntrack_netlink, which needs nf_conntrack)
// through the host's modprobe. That works from a container too, with
// CAP_NET_ADMIN only, and without a modprobe binary in the image.

// EnsureModule makes sure nf_conntrack is loaded before Tune reads its
// parameters: when probe's net/netfilter/nf_conntrack_max is missing, it
// calls load (TriggerModuleLoad outside tests) and checks that the sysctl
// exists afterwards. It returns nil when the module was loaded already or
// is loaded now, otherwise load's error or the sysctl's.
func EnsureModule(procSys sysctl.Interface, load func() error) error {
	if _, err := procSys.Get(sysctlMax); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	klog.InfoS("nf_conntrack is not loaded; asking the kernel to load it through conntrack netlink")
	if err := load(); err != nil {
		return err
	}
	if _, err := procSys.Get(sysctlMax); err != nil {
		return err
	}
	klog.InfoS("nf_conntrack loaded")
	return nil
}

// TriggerModuleLoad dumps the IPv4 conntrack table of the caller's network
// namespace once, which has the kernel load nf_conntrack_netlink (and with
// it nf_conntrack) when they are modules not loaded yet.
func TriggerModuleLoad() error {
	t, err := NewNetlinkTable(netns.None())
	if err != nil {
		return err
	}
	defer t.Close()
	// The table is empty when the module was not loaded: the dump is
	// only the trigger (narrowed in the kernel to nothing, in case it
	// was loaded after all and holds millions).
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lanes[0].dump.Dump(uint8(inetFamily(v1.IPv4Protocol)), matchNothing, func([]byte) error { return nil })
}

// matchNothing is a dump filter no entry matches: UDP to 0.0.0.0.
var matchNothing = ctnetlink.Filter{Proto: protoUDP, OrigDst: netip.AddrPortFrom(netip.IPv4Unspecified(), 0)}
