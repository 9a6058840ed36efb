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

// podCIDRWait is how long the daemon waits for its Node to get
// spec.podCIDRs in NodeCIDR mode: kube-proxy's 5 minutes.
const podCIDRWait = 5 * time.Minute

// podCIDRPoll is how often the Node is read meanwhile (kube-proxy: 1 s).
const podCIDRPoll = time.Second

// awaitPodCIDRs waits, in NodeCIDR local-traffic detection mode, until the
// Node has pod CIDRs, as kube-proxy does at start, and records them in
// o.NodePodCIDRs (they decide the IP families too). Later changes need no
// restart here (kube-proxy exits on them): they reach the proxier as Node
// updates, which make the next sync full with the new match.
func awaitPodCIDRs(ctx context.Context, o *Options, client kubeapi.Client, nodeName string) error {
	if !o.LocalDetector.NeedsNodePodCIDRs() {
		return nil
	}
	klog.InfoS("Watching for node, awaiting podCIDR allocation", "node", nodeName)
	cidrs, err := waitForPodCIDRs(ctx, client, nodeName, podCIDRPoll, podCIDRWait)
	if err != nil {
		return fmt.Errorf("--detect-local-mode=NodeCIDR: %w", err)
	}
	klog.InfoS("NodeInfo", "node", nodeName, "podCIDRs", cidrs)
	o.NodePodCIDRs = cidrs
	return nil
}

func waitForPodCIDRs(ctx context.Context, client kubeapi.Client, nodeName string, poll, timeout time.Duration) ([]netip.Prefix, error) {
	var cidrs []netip.Prefix
	exists := false
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := client.Node(ctx, nodeName)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				klog.V(2).InfoS("Waiting for the node object", "node", nodeName, "err", err)
			}
			return false, nil
		}
		exists = true
		cidrs = proxier.NodeInfoFromNode(node).PodCIDRs
		return len(cidrs) > 0, nil
	})
	switch {
	case err == nil:
		return cidrs, nil
	case !exists:
		return nil, fmt.Errorf("timeout waiting for node %q to exist: %w", nodeName, err)
	}
	return nil, fmt.Errorf("timeout waiting for PodCIDR allocation on node %q: %w", nodeName, err)
}

// logLocalDetection logs the detector per family, and, as kube-proxy
// does, that ClusterCIDR or NodeCIDR mode detects nothing in the primary
// family when it has no CIDR of that family (then cluster-IP traffic is
// not masqueraded by source and no pod traffic is short-circuited).
func logLocalDetection(o *Options) {
	primary := o.PrimaryFamily
	node := proxier.NodeInfo{PodCIDRs: o.NodePodCIDRs}
	for _, f := range o.Families {
		m := o.LocalDetector.Match(f, node)
		klog.V(2).InfoS("Local-traffic detection", "detectLocalMode", o.LocalDetector.Mode, "ipFamily", f, "match", m)
		if f == primary && !m.IsImplemented() {
			klog.InfoS("Detect-local-mode set to "+string(o.LocalDetector.Mode)+", but no CIDR specified for primary IP family; no traffic is treated as local",
				"ipFamily", f, "clusterCIDRs", o.ClusterCIDRs, "podCIDRs", o.NodePodCIDRs)
		}
	}
}
