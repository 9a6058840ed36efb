package framework

import (
	"fmt"
	"net/netip"
)

// Addresses of the default topology. The pod network is one /24 on a bridge
// in the node namespace; the client sits on a separate "external" /24.
const (
	DefaultPodCIDR     = "10.244.0.0/24"
	DefaultClusterCIDR = "10.244.0.0/16"
	DefaultExtCIDR     = "192.168.77.0/24"
	DefaultServiceCIDR = "10.96.0.0/16"
)

// Interface names. Pod and client ends are "eth0" in their own namespaces;
// the node ends are numbered in the node namespace.
const (
	bridgeName     = "br0"
	podIfName      = "eth0"
	nodeClientVeth = "veth-client"
)

// TopologySpec describes the namespaces to build.
type TopologySpec struct {
	ID   string // prefix of every namespace name, e.g. "sy1234"
	Pods int    // number of pod namespaces
	// PodCIDR and ExtCIDR default to DefaultPodCIDR / DefaultExtCIDR. The
	// node takes the first host address of each, pods and the client the
	// following ones.
	PodCIDR string
	ExtCIDR string
}

// Pod is one pod network namespace.
type Pod struct {
	Name string // short name, used as the echo server's reply name
	NS   string // network namespace name
	IP   string
}

// Topology is a built (or planned) set of namespaces.
type Topology struct {
	ID       string
	NodeNS   string
	ClientNS string
	NodeName string // Kubernetes Node object name for the node namespace
	NodeIP   string // node address on the external network (InternalIP)
	BridgeIP string // node address on the pod bridge, the pods' gateway
	ClientIP string
	PodCIDR  string
	ExtCIDR  string
	Pods     []Pod
}

// Namespaces lists every namespace of the topology, node first.
func (t *Topology) Namespaces() []string {
	ns := []string{t.NodeNS, t.ClientNS}
	for _, p := range t.Pods {
		ns = append(ns, p.NS)
	}
	return ns
}

// PodIPs lists the pods' IPs in pod order.
func (t *Topology) PodIPs() []string {
	ips := make([]string, len(t.Pods))
	for i, p := range t.Pods {
		ips[i] = p.IP
	}
	return ips
}

// NewTopologyPlan assigns names and addresses for spec without creating
// anything.
func NewTopologyPlan(spec TopologySpec) (*Topology, error) {
	podNet, err := parsePrefix(spec.PodCIDR, DefaultPodCIDR)
	if err != nil {
		return nil, err
	}
	extNet, err := parsePrefix(spec.ExtCIDR, DefaultExtCIDR)
	if err != nil {
		return nil, err
	}
	if spec.ID == "" {
		return nil, fmt.Errorf("topology needs an ID")
	}
	podIPs, err := hostAddrs(podNet, spec.Pods+1)
	if err != nil {
		return nil, err
	}
	extIPs, err := hostAddrs(extNet, 2)
	if err != nil {
		return nil, err
	}
	t := &Topology{
		ID: spec.ID, NodeNS: spec.ID + "-node", ClientNS: spec.ID + "-client", NodeName: spec.ID + "-node",
		NodeIP: extIPs[0], ClientIP: extIPs[1], BridgeIP: podIPs[0],
		PodCIDR: podNet.String(), ExtCIDR: extNet.String(),
	}
	for i := range spec.Pods {
		name := fmt.Sprintf("pod%d", i)
		t.Pods = append(t.Pods, Pod{Name: name, NS: spec.ID + "-" + name, IP: podIPs[i+1]})
	}
	return t, nil
}

func parsePrefix(s, def string) (netip.Prefix, error) {
	if s == "" {
		s = def
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("bad IPv4 CIDR %q: %v", s, err)
	}
	return p.Masked(), nil
}

// hostAddrs returns the first n host addresses of p (skipping the network
// address and never reaching the broadcast address).
func hostAddrs(p netip.Prefix, n int) ([]string, error) {
	var out []string
	a := p.Addr().Next()
	for range n {
		if !p.Contains(a.Next()) {
			return nil, fmt.Errorf("%s has no room for %d hosts", p, n)
		}
		out = append(out, a.String())
		a = a.Next()
	}
	return out, nil
}

// prefixLen is the "/24" part of a CIDR, for `ip addr add IP/LEN`.
func prefixLen(cidr string) int {
	return netip.MustParsePrefix(cidr).Bits()
}
