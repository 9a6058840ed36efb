package ipvs_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestExternalTrafficPolicyLocal(t *testing.T) {
	e := newEnv(t)
	local := e.svc("local", "10.96.0.30", 80, func(sp *proxier.ServicePort) {
		sp.NodePort, sp.ExternalPolicyLocal = 30030, true
		sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.30")}
	})
	e.eps(local, "10.244.1.30:8080", "10.244.2.31:8080@")
	e.sync(nil)
	every := []string{"10.244.1.30:8080/1", "10.244.2.31:8080/1"}
	only := []string{"10.244.1.30:8080/1"}
	for key, want := range map[string][]string{
		"TCP/10.96.0.30:80":      every, // cluster IP: internal traffic
		"TCP/192.168.0.10:30030": only,  // NodePort: external traffic
		"TCP/198.51.100.30:80":   only,
		"FWM/0x10000/IPv4":       every, // internal traffic to external addresses
	} {
		if got := e.reals(key); !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", key, got, want)
		}
	}
	nat := e.k.IPTables.Dump("ipv4", "nat")
	for _, want := range []string{
		"-A KUBE-IPVS-INTERNAL -d 198.51.100.30/32 -p tcp",
		"-A KUBE-IPVS-INTERNAL -d 192.168.0.10/32 -p tcp",
		"-j MARK --set-xmark 0x10000/0xfff0000",
	} {
		if !strings.Contains(nat, want) {
			t.Errorf("nat lacks %q:\n%s", want, nat)
		}
	}
	// A second such service gets another mark; the first keeps its own.
	other := e.svc("other", "10.96.0.31", 80, func(sp *proxier.ServicePort) {
		sp.NodePort, sp.ExternalPolicyLocal = 30031, true
	})
	e.eps(other, "10.244.1.40:8080")
	e.sync(changed(other))
	if e.reals("FWM/0x10000/IPv4") == nil || e.reals("FWM/0x20000/IPv4") == nil {
		t.Errorf("marks:\n%s", e.k.IPVS.Dump())
	}
	// Back to Cluster policy: the fwmark service and its rules go.
	e.state.Services[local].ExternalPolicyLocal = false
	e.sync(changed(local))
	if e.reals("FWM/0x10000/IPv4") != nil {
		t.Errorf("fwmark service of a Cluster-policy service left:\n%s", e.k.IPVS.Dump())
	}
	if got := e.reals("TCP/192.168.0.10:30030"); !slices.Equal(got, every) {
		t.Errorf("NodePort with Cluster policy: %v", got)
	}
}

func TestLoadBalancerSourceRanges(t *testing.T) {
	e := newEnv(t)
	lb := e.svc("lb", "10.96.0.20", 80, func(sp *proxier.ServicePort) {
		sp.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("198.51.100.20")}
		sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}
	})
	e.eps(lb, "10.244.1.20:8080")
	e.sync(nil)
	if got := e.k.IPSet.Entries("KUBE-LOAD-BALANCER-FW"); !slices.Equal(got, []string{"198.51.100.20,tcp:80"}) {
		t.Errorf("KUBE-LOAD-BALANCER-FW = %v", got)
	}
	if got := e.k.IPSet.Entries("KUBE-LOAD-BALANCER-SOURCE-CIDR"); !slices.Equal(got, []string{"198.51.100.20,tcp:80,203.0.113.0/24"}) {
		t.Errorf("KUBE-LOAD-BALANCER-SOURCE-CIDR = %v (only the IPv4 range)", got)
	}
}
