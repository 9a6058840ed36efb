package app

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
)

// nodeIPWait bounds how long the daemon waits at start for its Node
// object to carry addresses: kube-proxy's 30 seconds. It goes on without
// them (the primary family is then IPv4, or --bind-address's).
const nodeIPWait = 30 * time.Second

// nodeIPPoll is how often the Node is read meanwhile (kube-proxy: 1 s).
const nodeIPPoll = time.Second

// awaitNodeIPs returns the node's host IPs (see nodeHostIPs), waiting up
// to nodeIPWait for the Node to exist and have addresses, as kube-proxy's
// NodeManager does. A node still without addresses is logged, not fatal.
func awaitNodeIPs(ctx context.Context, client kubeapi.Client, nodeName string, poll, timeout time.Duration) []netip.Addr {
	var ips []netip.Addr
	exists := false
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := client.Node(ctx, nodeName)
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return false, err // waiting cannot help
		}
		if err != nil {
			if !apierrors.IsNotFound(err) {
				klog.V(2).InfoS("Waiting for the node object", "node", nodeName, "err", err)
			}
			return false, nil
		}
		exists = true
		ips = nodeHostIPs(node)
		return len(ips) > 0, nil
	})
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		klog.ErrorS(err, "The API server denies switchyard access to its Node; going on without the node's IPs (primary family IPv4 unless --bind-address says otherwise). "+
			"Check the switchyard ServiceAccount's ClusterRole and ClusterRoleBinding (deploy/clusterrole*.yaml)", "resource", "nodes", "node", nodeName)
	case len(ips) > 0:
		klog.InfoS("Successfully retrieved NodeIPs", "NodeIPs", ips)
	case !exists:
		klog.ErrorS(nil, "Timed out waiting for node to exist", "node", nodeName)
	default:
		klog.ErrorS(nil, "Timed out waiting for node to be assigned IPs", "node", nodeName)
	}
	return ips
}

// nodeHostIPs are the node's primary IP and, when it has one, its first
// IP of the other family, as the kubelet and kube-proxy read them: the
// first InternalIP (else the first ExternalIP) is primary.
func nodeHostIPs(node *v1.Node) []netip.Addr {
	var all []netip.Addr
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); a.Type == typ && err == nil && ip.Zone() == "" {
				all = append(all, ip.Unmap())
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	out := all[:1:1]
	for _, ip := range all[1:] {
		if ip.Is4() != out[0].Is4() {
			return append(out, ip)
		}
	}
	return out
}

// primaryNodeIPs are the node's IPs with --bind-address, when it names an
// address, as the primary one: kube-proxy's "node IPs", one per family at
// most, primary first.
func primaryNodeIPs(nodeIPs []netip.Addr, bind netip.Addr) []netip.Addr {
	if !bind.IsValid() || bind.IsUnspecified() {
		return nodeIPs
	}
	out := []netip.Addr{bind.Unmap()}
	for _, ip := range nodeIPs {
		if ip.Is4() != out[0].Is4() {
			return append(out, ip)
		}
	}
	return out
}

// resolveNodePortAddresses adds the node's IPs (one /32 or /128 prefix
// per family) for the "primary" keyword. Unlike kube-proxy, which then
// accepts NodePorts on every address, a node without a known IP is an
// error when "primary" was asked for and nothing else routable was: the
// operator asked for a restriction that cannot be made. When nftables
// mode's default asked for it, NodePorts fall back to every address, as
// in kube-proxy.
func resolveNodePortAddresses(o *Options, nodeIPs []netip.Addr) error {
	if !o.NodePortPrimary {
		return nil
	}
	before := len(o.NodePortAddresses)
	for _, ip := range nodeIPs {
		if !ip.IsLoopback() {
			o.NodePortAddresses = append(o.NodePortAddresses, netip.PrefixFrom(ip, ip.BitLen()))
		}
	}
	switch {
	case len(o.NodePortAddresses) > before:
		klog.InfoS("NodePorts restricted to the node's primary addresses", "addresses", o.NodePortAddresses)
	case o.NodePortDefaulted:
		klog.InfoS("The node has no addresses for --nodeport-addresses' default 'primary'; NodePorts are served on every local address", "waited", nodeIPWait)
		o.NodePortAddresses = append(o.NodePortAddresses, nodePortKeywords["all"]...)
	case !slices.ContainsFunc(o.NodePortAddresses, func(p netip.Prefix) bool { return !p.Addr().IsLoopback() }):
		return fmt.Errorf("--nodeport-addresses=primary: the node has no addresses after %v (set --bind-address or list CIDRs)", nodeIPWait)
	default:
		klog.InfoS("The node has no addresses for --nodeport-addresses' 'primary'; the other entries stand", "addresses", o.NodePortAddresses)
	}
	return nil
}
