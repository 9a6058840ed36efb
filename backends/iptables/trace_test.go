package iptables

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestTraceBeyondFlowTable traces what the shared table does not cover:
// loadBalancerSourceRanges, returning clients with session affinity,
// NodePortAddresses and masquerade-all.
func TestTraceBeyondFlowTable(t *testing.T) {
	lb := with(svc("ns", "lb", "https", v1.ProtocolTCP, 443, "10.96.0.40"), nodePort(30443), lbIPs("198.51.100.40"),
		sourceRangesOpt("203.0.113.0/24"))
	sticky := with(svc("ns", "sticky", "http", v1.ProtocolTCP, 80, "10.96.0.50"), affinity(10800))
	np := with(svc("ns", "np", "", v1.ProtocolTCP, 80, "10.96.0.20"), nodePort(30080))
	eps := []proxier.Endpoint{ep("10.244.2.1:8080"), ep("10.244.3.1:8080")}
	st := stateOf([]string{"192.168.1.10"}, []*proxier.ServicePort{lb, sticky, np},
		epMap{lb.Name: eps, sticky.Name: eps, np.Name: eps})
	fake := iptablestest.NewFake()
	mustSync(t, newTestBackend(t, fake, func(c *Config) {
		c.NodePortAddresses = mustPrefixes("192.168.1.0/24")
		c.MasqueradeAll = true
	}), st, fullDiff())

	nodeIPs := []netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("10.0.0.10")}
	all := []string{"10.244.2.1:8080", "10.244.3.1:8080"}
	cases := []struct {
		name       string
		pkt        iptablestest.Packet
		endpoints  []string
		dropped    bool
		masquerade bool
	}{
		{"LB IP from an allowed source", pkt("203.0.113.9", "198.51.100.40", 443), all, false, true},
		{"LB IP from another source is dropped", pkt("192.0.2.9", "198.51.100.40", 443), nil, true, false},
		{"NodePort ignores source ranges", pkt("192.0.2.9", "192.168.1.10", 30443), all, false, true},
		{"NodePort on an address outside nodeport-addresses", pkt("192.0.2.9", "10.0.0.10", 30080), nil, false, false},
		{"NodePort on an address inside nodeport-addresses", pkt("192.0.2.9", "192.168.1.10", 30080), all, false, true},
		{"masquerade-all: pod to cluster IP is masqueraded", pkt("10.244.1.9", "10.96.0.50", 80), all, false, true},
		{"affinity: returning client may use its endpoint", withRecent(pkt("10.244.1.9", "10.96.0.50", 80)), all, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.pkt.NodeIPs = nodeIPs
			res, err := fake.Trace(runner.IPv4, tc.pkt)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.endpoints, res.Endpoints); d != "" {
				t.Errorf("endpoints (-want +got):\n%s", d)
			}
			if res.Dropped != tc.dropped || res.Masquerade != tc.masquerade {
				t.Errorf("dropped=%v masquerade=%v, want %v %v", res.Dropped, res.Masquerade, tc.dropped, tc.masquerade)
			}
		})
	}
}

func pkt(src, dst string, port uint16) iptablestest.Packet {
	return iptablestest.Packet{SrcIP: netip.MustParseAddr(src), DstIP: netip.MustParseAddr(dst), DstPort: port, SrcPort: 40000}
}

func withRecent(p iptablestest.Packet) iptablestest.Packet {
	p.RecentMayMatch = true
	return p
}
