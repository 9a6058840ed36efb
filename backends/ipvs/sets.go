package ipvs

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
)

// setKind is one of the IP sets the companion iptables rules match on.
// The names are kube-proxy's, so `ipset list` reads as users know it.
type setKind struct {
	base    string // IPv4 name
	typ     string
	comment string
}

// The sets. IPv6 names start with "KUBE-6-" (as kube-proxy's).
var (
	setClusterIP = setKind{"KUBE-CLUSTER-IP", ipset.HashIPPort,
		"Kubernetes service cluster ip + port for masquerade purpose"}
	setLoopBack = setKind{"KUBE-LOOP-BACK", ipset.HashIPPortIP,
		"Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"}
	setExternalIP = setKind{"KUBE-EXTERNAL-IP", ipset.HashIPPort,
		"Kubernetes service external ip + port for masquerade and filter purpose"}
	setExternalIPLocal = setKind{"KUBE-EXTERNAL-IP-LOCAL", ipset.HashIPPort,
		"Kubernetes service external ip + port with externalTrafficPolicy=local"}
	setLoadBalancer = setKind{"KUBE-LOAD-BALANCER", ipset.HashIPPort,
		"Kubernetes service lb portal"}
	setLoadBalancerLocal = setKind{"KUBE-LOAD-BALANCER-LOCAL", ipset.HashIPPort,
		"Kubernetes service load balancer ip + port with externalTrafficPolicy=local"}
	setLoadBalancerFW = setKind{"KUBE-LOAD-BALANCER-FW", ipset.HashIPPort,
		"Kubernetes service load balancer ip + port for load balancer with sourceRange"}
	setLoadBalancerSourceCIDR = setKind{"KUBE-LOAD-BALANCER-SOURCE-CIDR", ipset.HashIPPortNet,
		"Kubernetes service load balancer ip + port + source cidr for packet filter purpose"}
	setNodePortTCP       = setKind{"KUBE-NODE-PORT-TCP", ipset.BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"}
	setNodePortLocalTCP  = setKind{"KUBE-NODE-PORT-LOCAL-TCP", ipset.BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"}
	setNodePortUDP       = setKind{"KUBE-NODE-PORT-UDP", ipset.BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"}
	setNodePortLocalUDP  = setKind{"KUBE-NODE-PORT-LOCAL-UDP", ipset.BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"}
	setNodePortSCTP      = setKind{"KUBE-NODE-PORT-SCTP", ipset.BitmapPort, "Kubernetes nodeport SCTP port for masquerade purpose"}
	setNodePortLocalSCTP = setKind{"KUBE-NODE-PORT-LOCAL-SCTP", ipset.BitmapPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local"}
)

// allSets lists every set, in creation order.
func allSets() []setKind {
	return []setKind{setClusterIP, setLoopBack, setExternalIP, setExternalIPLocal,
		setLoadBalancer, setLoadBalancerLocal, setLoadBalancerFW, setLoadBalancerSourceCIDR,
		setNodePortTCP, setNodePortLocalTCP, setNodePortUDP, setNodePortLocalUDP,
		setNodePortSCTP, setNodePortLocalSCTP}
}

// name is the set's name in the family: "KUBE-6-..." for IPv6, shortened
// where that would pass the kernel's 31 characters.
func (s setKind) name(f v1.IPFamily) string {
	if f != v1.IPv6Protocol {
		return s.base
	}
	n := "KUBE-6-" + strings.TrimPrefix(s.base, "KUBE-")
	if len(n) > ipset.MaxNameLength {
		n = strings.Replace(n, "LOAD-BALANCER", "LB", 1)
	}
	return n
}

// createLine is the restore command that makes the set (kept if it
// exists). maxelem is generous: KUBE-LOOP-BACK holds one entry per
// endpoint of every service.
func (s setKind) createLine(f v1.IPFamily) string {
	if s.typ == ipset.BitmapPort {
		return "create " + s.name(f) + " " + s.typ + " range 0-65535 -exist"
	}
	return "create " + s.name(f) + " " + s.typ + " family " + ipsetFamily(f) + " hashsize 1024 maxelem 1048576 -exist"
}

func ipsetFamily(f v1.IPFamily) string {
	if f == v1.IPv6Protocol {
		return ipset.FamilyINet6
	}
	return ipset.FamilyINet
}

// nodePortSets returns the NodePort set and its eTP=Local subset for a
// protocol.
func nodePortSets(p v1.Protocol) (all, local setKind) {
	switch p {
	case v1.ProtocolUDP:
		return setNodePortUDP, setNodePortLocalUDP
	case v1.ProtocolSCTP:
		return setNodePortSCTP, setNodePortLocalSCTP
	}
	return setNodePortTCP, setNodePortLocalTCP
}
