package nftables_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Short connections of the masquerade test: the client cycles through
// 500 source ports, so each is used again about 6 times while the
// endpoint still holds a TIME_WAIT socket of the previous use (60 s).
const (
	masqConns     = 3000
	masqPortRange = "net.ipv4.ip_local_port_range=40000 40499"
	masqTimeout   = 5 * time.Second // a SYN retransmitted twice takes over 1 s
)

// TestKernelMasqueradeTCPPorts makes short connections from an outside
// client to a masqueraded NodePort whose one endpoint closes first. With
// MasqueradeTCPKeepPort a reused client port reaches the endpoint from
// the same node port, with the timestamps and sequence numbers of the
// same 4-tuple, so no TIME_WAIT socket refuses a SYN (PAWS) and no SYN
// is retransmitted. With kube-proxy's rules (the default), on a kernel
// whose timestamp offsets depend on the ports, the same run meets PAWS
// refusals and SYN retransmits, which shows the check sees what the
// option avoids.
func TestKernelMasqueradeTCPPorts(t *testing.T) {
	kerneltest.Require(t)
	for _, tc := range []struct {
		name        string
		tcpKeepPort bool
	}{{"TCP ports kept", true}, {"random-fully as kube-proxy (default)", false}} {
		t.Run(tc.name, func(t *testing.T) {
			tp := newTrafficTopo(t, 1)
			run(t, "ip", "netns", "exec", tp.client, "sysctl", "-qw", masqPortRange)
			b, err := nftables.New(nftables.Config{
				LocalDetector:         proxier.DetectByClusterCIDRs(netip.MustParsePrefix("10.244.0.0/16")),
				Conn:                  nftables.NewNetlinkConn(),
				MasqueradeTCPKeepPort: tc.tcpKeepPort,
			})
			if err != nil {
				t.Fatal(err)
			}
			st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{},
				Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{}, Node: proxier.NodeInfo{Name: thisNode}}
			web := svcPort("web", v1.ProtocolTCP, webIP, 30080)
			st.Services[web.Name], st.Endpoints[web.Name] = web, podEndpoints(0)
			timedSync(t, tp.node, b, st, fullDiff())
			addr := net.JoinHostPort(nodeIP, webNodePort)
			r, err := kerneltest.MeasureShortConns(tp.client, tp.pods[0], addr, masqConns, nil, masqTimeout)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(r)
			kerneltest.CheckMasqueradeTCPPorts(t, r, tc.tcpKeepPort, tp.client, addr, masqTimeout)
		})
	}
}
