package flowtest

import (
	"net/netip"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// LocalTrafficCase is one detector of the kernel tests, with the sources
// whose connections to a cluster IP keep their address (local traffic);
// every other source must be masqueraded to kerneltest.LTEndpointGateway.
type LocalTrafficCase struct {
	Name     string
	Detector proxier.LocalDetector
	Kept     []string // of "bridge pod", "veth pod", "client", "node"
}

// LocalTrafficCases are kube-proxy's four --detect-local-mode values over
// kerneltest.LocalTrafficTopology (kernel tests of the backends). The node's own traffic and the outside client's
// are never local; which pod is depends on the detector.
func LocalTrafficCases() []LocalTrafficCase {
	return []LocalTrafficCase{
		{"ClusterCIDR", proxier.DetectByClusterCIDRs(netip.MustParsePrefix(kerneltest.LTClusterCIDR)), []string{"bridge pod"}},
		{"NodeCIDR", proxier.DetectByNodeCIDR(), []string{"bridge pod"}},
		{"BridgeInterface", proxier.DetectByBridge(kerneltest.LTBridge), []string{"bridge pod"}},
		{"InterfaceNamePrefix", proxier.DetectByInterfacePrefix(kerneltest.LTVethPrefix), []string{"veth pod"}},
	}
}
