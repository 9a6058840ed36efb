package nftables_test

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestKernelLocalTrafficDetection sends real connections to a cluster IP
// through a node namespace programmed by each --detect-local-mode: the pod
// the detector calls local keeps its source address ("ip saddr CIDR",
// `iifname "br0"` or `iifname "cali*"`); the other pod, an outside client
// and the node itself are masqueraded. nft reads the rules back as written.
func TestKernelLocalTrafficDetection(t *testing.T) {
	kerneltest.Require(t)
	for _, c := range flowtest.LocalTrafficCases() {
		t.Run(c.Name, func(t *testing.T) {
			tp := kerneltest.NewLocalTrafficTopology(t)
			b, err := nftables.New(nftables.Config{LocalDetector: c.Detector, Conn: nftables.NewNetlinkConn()})
			if err != nil {
				t.Fatal(err)
			}
			timedSync(t, tp.Node, b, localTrafficState(), fullDiff())
			tp.CheckLocalTraffic(t, net.JoinHostPort(webIP, "80"), c.Kept)
			out := kerneltest.Run(t, "ip", "netns", "exec", tp.Node, "nft", "list", "table", "ip", nftables.TableName)
			const clusterIP = " ip daddr . meta l4proto . th dport @cluster-ip-ports jump mark-for-masquerade"
			if want := map[string]string{
				"ClusterCIDR": "ip saddr != 10.244.0.0/16" + clusterIP, "NodeCIDR": "ip saddr != 10.244.0.0/24" + clusterIP,
				"BridgeInterface": `iifname != "br0"` + clusterIP, "InterfaceNamePrefix": `iifname != "cali*"` + clusterIP,
			}[c.Name]; !strings.Contains(out, want) {
				t.Errorf("nft list table ip %s has no %q:\n%s", nftables.TableName, want, out)
			}
		})
	}
}

// localTrafficState: one service whose only endpoint is the topology's,
// on a node whose spec.podCIDRs is the bridge's subnet.
func localTrafficState() *proxier.State {
	sp := svcPort("web", v1.ProtocolTCP, webIP, 0)
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{sp.Name: sp},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{sp.Name: {{
			IP: netip.MustParseAddr(kerneltest.LTEndpointIP), Port: kerneltest.LTEndpointPort, Ready: true, Serving: true, NodeName: thisNode, IsLocal: true}}},
		Node: proxier.NodeInfo{Name: thisNode, PodCIDRs: []netip.Prefix{netip.MustParsePrefix(kerneltest.LTNodePodCIDR)}}}
	return st
}
