package app

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// nodeIPWait bounds how long the daemon waits for its Node object to
// carry addresses when --nodeport-addresses=primary needs them (kube-proxy
// waits the same way).
const nodeIPWait = 30 * time.Second

// resolveNodePortAddresses turns --nodeport-addresses=primary into the
// node's own addresses (one /32 or /128 prefix each), read from its Node
// object. Other settings pass through unchanged.
func resolveNodePortAddresses(ctx context.Context, o *Options, client kubeapi.Client, nodeName string) error {
	if !o.NodePortPrimary {
		return nil
	}
	ips, err := waitForNodeIPs(ctx, client, nodeName)
	if err != nil {
		return fmt.Errorf("--nodeport-addresses=primary: %w", err)
	}
	o.NodePortAddresses = nil
	for _, ip := range ips {
		o.NodePortAddresses = append(o.NodePortAddresses, netip.PrefixFrom(ip, ip.BitLen()))
	}
	klog.InfoS("NodePorts restricted to the node's primary addresses", "addresses", o.NodePortAddresses)
	return nil
}

func waitForNodeIPs(ctx context.Context, client kubeapi.Client, nodeName string) ([]netip.Addr, error) {
	var ips []netip.Addr
	err := wait.PollUntilContextTimeout(ctx, time.Second, nodeIPWait, true, func(ctx context.Context) (bool, error) {
		node, err := client.Node(ctx, nodeName)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			klog.InfoS("Waiting for the node object", "node", nodeName, "err", err)
			return false, nil
		}
		ips = proxier.NodeInfoFromNode(node).Addresses
		return len(ips) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("node %q has no addresses after %v: %w", nodeName, nodeIPWait, err)
	}
	return ips, nil
}
