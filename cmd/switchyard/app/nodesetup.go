package app

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/cpuset"

	"github.com/switchyard-proxy/switchyard/conntrack"
	"github.com/switchyard-proxy/switchyard/internal/sysctl"
)

const sysctlRouteLocalnet = "net/ipv4/conf/all/route_localnet"

// setupNode makes the kernel settings kube-proxy makes before it
// programs anything: the conntrack tuning in every mode, and
// route_localnet=1 when localhost NodePorts are on. procSys and module are
// sysctl.Proc and sysctl.ConntrackModule outside tests, loadConntrack
// conntrack.TriggerModuleLoad: unlike kube-proxy, switchyard has the kernel
// load nf_conntrack when it is missing rather than fail.
func setupNode(o *Options, procSys, module sysctl.Interface, loadConntrack func() error) error {
	if o.Conntrack != (conntrack.Tuning{}) {
		if err := conntrack.EnsureModule(procSys, loadConntrack); err != nil {
			return fmt.Errorf("nf_conntrack is not loaded and loading it failed (modprobe nf_conntrack on the node): %w", err)
		}
	}
	if err := conntrack.Tune(o.Conntrack, numCPU(), procSys, module); err != nil {
		return fmt.Errorf("could not set conntrack parameters from kube-proxy configuration: %w", err)
	}
	if !localhostNodePorts(o) {
		return nil
	}
	wrote, err := sysctl.Ensure(procSys, sysctlRouteLocalnet, 1)
	if err != nil {
		return fmt.Errorf("setting %s=1 for localhost NodePorts (disable them with --iptables-localhost-nodeports=false): %w", sysctlRouteLocalnet, err)
	}
	if wrote {
		klog.InfoS("Set route_localnet=1 to allow NodePorts on localhost; to change this either disable iptables.localhostNodePorts (--iptables-localhost-nodeports) or set nodePortAddresses (--nodeport-addresses) to filter loopback addresses")
	}
	return nil
}

// setupThisNode is setupNode on the running kernel.
func setupThisNode(o *Options) error {
	return setupNode(o, sysctl.Proc, sysctl.ConntrackModule, conntrack.TriggerModuleLoad)
}

// initOnly is --init-only: the node settings, then exit. It needs no API
// server: with --nodeport-addresses=primary localhost NodePorts are off
// anyway, so the node's addresses do not matter here.
func initOnly(o *Options) error {
	// No Node is read: the primary family is --bind-address's, else IPv4.
	if err := decideFamilies(o, nil, newRealProbe(o)); err != nil {
		return err
	}
	if err := setupThisNode(o); err != nil {
		return err
	}
	klog.InfoS("Node settings applied; exiting (--init-only)", "mode", o.Mode)
	return nil
}

// localhostNodePorts reports whether IPv4 NodePorts answer on 127.0.0.0/8:
// iptables mode only, asked for, IPv4 served, and loopback among the
// NodePort addresses (all addresses, or a prefix holding 127.0.0.1), as in
// kube-proxy. Call it after --nodeport-addresses=primary is resolved.
func localhostNodePorts(o *Options) bool {
	if !specOf(o.Mode).routeLocalnet || !o.LocalhostNodePorts || !slices.Contains(o.Families, v1.IPv4Protocol) {
		return false
	}
	loopback := netip.MustParseAddr("127.0.0.1")
	anyV4 := false
	for _, p := range o.NodePortAddresses {
		if !p.Addr().Is4() {
			continue
		}
		anyV4 = true
		if p.Contains(loopback) {
			return true
		}
	}
	return !anyV4 && !o.NodePortPrimary
}

// applyOOMScoreAdj sets the daemon's OOM score adjustment (-999 by
// default, so the OOM killer takes almost anything else first). As in
// kube-proxy, a failure (no CAP_SYS_RESOURCE for a negative value, say) is
// logged and the daemon goes on.
func applyOOMScoreAdj(value int) {
	err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(value)), 0o644)
	if err != nil {
		klog.V(2).InfoS("Failed to apply OOMScore", "err", err)
	}
}

// numCPU counts the online CPUs as kube-proxy does for conntrack sizing.
func numCPU() int {
	if n, err := cpuset.NumCPU(); err == nil && n > 0 {
		return n
	}
	return runtime.NumCPU()
}
