package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
)

// The IP families a node programs are decided as kube-proxy decides them
// (cmd/kube-proxy/app: detectNodeIPs, platformCheckSupported): the
// primary family is --bind-address's when it names an address, else the
// family of the node's first IP, else IPv4; the other family is programmed
// too whenever the mode's tools and the kernel support it, whatever the
// cluster CIDRs say. A Calico-style configuration (no clusterCIDR,
// InterfaceNamePrefix detection) on a dual-stack cluster therefore
// programs IPv6 Services as well.

// familyProbe answers what the node supports; realProbe asks the iptables
// binaries and the kernel.
type familyProbe interface {
	// IPTables is kube-proxy's iptables Present check for one family:
	// the nat table's POSTROUTING chain can be listed.
	IPTables(f v1.IPFamily) error
	// KernelIPv6 fails when the kernel has no IPv6 or it is disabled.
	KernelIPv6() error
}

// detectPrimaryFamily is the family of --bind-address when it names an
// address, else of the node's first IP, else IPv4.
func detectPrimaryFamily(nodeIPs []netip.Addr, bind netip.Addr) v1.IPFamily {
	if ips := primaryNodeIPs(nodeIPs, bind); len(ips) > 0 && ips[0].Is6() {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// supportedFamilies reports which families mode can program here. The
// iptables-based modes (iptables, ipvs, userspace: all write iptables
// rules) need that family's iptables tools; nftables mode talks netlink
// and supports both. IPv6 also needs the kernel's IPv6, on and enabled.
func supportedFamilies(mode Mode, p familyProbe) (v4, v6 bool, err error) {
	v4, v6 = true, true
	if specOf(mode).usesIPTables {
		err4, err6 := p.IPTables(v1.IPv4Protocol), p.IPTables(v1.IPv6Protocol)
		v4, v6 = err4 == nil, err6 == nil
		switch {
		case !v4 && !v6:
			return false, false, fmt.Errorf("iptables is not available on this host: %w", err4)
		case !v4:
			klog.InfoS("No iptables support for family", "ipFamily", v1.IPv4Protocol, "error", err4)
		case !v6:
			klog.InfoS("No iptables support for family", "ipFamily", v1.IPv6Protocol, "error", err6)
		}
	}
	if v6 {
		if err := p.KernelIPv6(); err != nil {
			klog.InfoS("No kernel support for family", "ipFamily", v1.IPv6Protocol, "error", err)
			v6 = false
		}
	}
	return v4, v6, nil
}

// decideFamilies sets o.PrimaryFamily and o.Families (primary first) from
// the node's IPs and what the node supports.
func decideFamilies(o *Options, nodeIPs []netip.Addr, p familyProbe) error {
	o.PrimaryFamily = detectPrimaryFamily(nodeIPs, o.BindAddress)
	v4, v6, err := supportedFamilies(o.Mode, p)
	if err != nil {
		return err
	}
	supported := map[v1.IPFamily]bool{v1.IPv4Protocol: v4, v1.IPv6Protocol: v6}
	if !supported[o.PrimaryFamily] {
		return fmt.Errorf("no support for primary IP family %q", o.PrimaryFamily)
	}
	o.Families = []v1.IPFamily{o.PrimaryFamily}
	if other := otherFamily(o.PrimaryFamily); supported[other] {
		o.Families = append(o.Families, other)
		klog.InfoS("switchyard running in dual-stack mode", "primary ipFamily", o.PrimaryFamily)
	} else {
		klog.InfoS("switchyard running in single-stack mode", "ipFamily", o.PrimaryFamily)
	}
	return nil
}

func otherFamily(f v1.IPFamily) v1.IPFamily {
	if f == v1.IPv4Protocol {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// dualStack reports whether o programs both families.
func dualStack(o *Options) bool { return len(o.Families) == 2 }

// realProbe checks the running node.
type realProbe struct {
	ipt    *runner.Runner
	iptErr error
}

// newRealProbe opens the iptables runner only for the modes that need
// iptables, and keeps it in o for the backend: opening one detects the
// iptables mode, which can save every table (iptablesRunner).
func newRealProbe(o *Options) *realProbe {
	p := &realProbe{}
	if specOf(o.Mode).usesIPTables {
		p.ipt, p.iptErr = runner.New(runner.Options{})
		o.IPTablesRunner = p.ipt
	}
	return p
}

// iptablesRunner is the runner the family probe opened, or a new one.
func iptablesRunner(o *Options) (*runner.Runner, error) {
	if o.IPTablesRunner != nil {
		return o.IPTablesRunner, nil
	}
	return runner.New(runner.Options{})
}

func (p *realProbe) IPTables(f v1.IPFamily) error {
	if p.iptErr != nil {
		return p.iptErr
	}
	fam := runner.IPv4
	if f == v1.IPv6Protocol {
		fam = runner.IPv6
	}
	_, err := p.ipt.ChainExists(fam, "nat", "POSTROUTING")
	return err
}

func (p *realProbe) KernelIPv6() error {
	if _, err := os.Stat("/proc/net/if_inet6"); err != nil {
		return fmt.Errorf("no IPv6 in the kernel: %w", err)
	}
	b, err := os.ReadFile("/proc/sys/net/ipv6/conf/all/disable_ipv6")
	if err == nil && strings.TrimSpace(string(b)) == "1" {
		return errors.New("IPv6 is disabled (net.ipv6.conf.all.disable_ipv6=1)")
	}
	return nil
}

// nodeFamilies reads what the daemon needs of its Node before it builds
// anything, in kube-proxy's order: the node's IPs (waiting up to 30 s),
// the families, --nodeport-addresses=primary, the pod CIDRs in NodeCIDR
// mode; then kube-proxy's checks of the settings against the families.
func nodeFamilies(ctx context.Context, o *Options, client kubeapi.Client, nodeName string) error {
	nodeIPs := awaitNodeIPs(ctx, client, nodeName, nodeIPPoll, nodeIPWait)
	if err := decideFamilies(o, nodeIPs, newRealProbe(o)); err != nil {
		return err
	}
	if err := resolveNodePortAddresses(o, primaryNodeIPs(nodeIPs, o.BindAddress)); err != nil {
		return err
	}
	if err := awaitPodCIDRs(ctx, o, client, nodeName); err != nil {
		return err
	}
	logLocalDetection(o)
	return checkFamilyConfig(o)
}
