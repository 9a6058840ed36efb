package iptables

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// TestMasqueradeTCPPorts pins KUBE-POSTROUTING in both families: by
// default kube-proxy's one --random-fully rule (TestRenderMatchesKubeProxy
// compares the whole chain with kube-proxy's); with MasqueradeTCPKeepPort
// TCP is masqueraded keeping the client's source port and every other
// protocol --random-fully.
func TestMasqueradeTCPPorts(t *testing.T) {
	head := []string{
		"-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
		"-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000",
	}
	tcp := `-A KUBE-POSTROUTING -p tcp -m comment --comment "kubernetes service TCP traffic requiring SNAT keeps its source port" -j MASQUERADE`
	all := `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`
	for _, tc := range []struct {
		tcpKeepPort bool
		want        []string
	}{
		{false, append(head, all)},
		{true, append(head, tcp, all)},
	} {
		cfg := testConfig()
		cfg.MasqueradeTCPKeepPort = tc.tcpKeepPort
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			var got []string
			for _, line := range strings.Split(render(cfg.forFamily(fam), stateOf(nil, nil, nil)).String(), "\n") {
				if strings.HasPrefix(line, "-A "+chainPostrouting+" ") {
					got = append(got, line)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("tcpKeepPort=%v %s: KUBE-POSTROUTING (-want +got):\n%s", tc.tcpKeepPort, fam, d)
			}
		}
	}
}
