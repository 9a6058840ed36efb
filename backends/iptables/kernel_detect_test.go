package iptables

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestKernelLocalTrafficDetection sends real connections to a cluster IP
// through a node namespace programmed by each --detect-local-mode, in
// both iptables modes: the pod the detector calls local keeps its source
// address ("-s CIDR", "-i br0" or "-i cali+" in KUBE-SVC); the other pod,
// an outside client and the node itself are masqueraded.
func TestKernelLocalTrafficDetection(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range kernelModes() {
		for _, c := range flowtest.LocalTrafficCases() {
			t.Run(mode+"/"+c.Name, func(t *testing.T) {
				tp := kerneltest.NewLocalTrafficTopology(t)
				cfg := Config{Families: []v1.IPFamily{v1.IPv4Protocol}, LocalDetector: c.Detector}
				be := newKernelBackend(t, cfg, mode, tp.Node)
				if _, err := be.Sync(context.Background(), localTrafficState(), fullDiff()); err != nil {
					t.Fatalf("Sync: %v", err)
				}
				tp.CheckLocalTraffic(t, net.JoinHostPort(webIP, "80"), c.Kept)
			})
		}
	}
}

// localTrafficState: one service whose only endpoint is the topology's,
// on a node whose spec.podCIDRs is the bridge's subnet.
func localTrafficState() *proxier.State {
	web := svc("default", "web", "http", v1.ProtocolTCP, 80, webIP)
	st := stateOf([]string{kerneltest.LTNodeIP}, []*proxier.ServicePort{web},
		epMap{web.Name: {ep(net.JoinHostPort(kerneltest.LTEndpointIP, strconv.Itoa(kerneltest.LTEndpointPort)))}})
	st.Node.PodCIDRs = []netip.Prefix{netip.MustParsePrefix(kerneltest.LTNodePodCIDR)}
	return st
}
