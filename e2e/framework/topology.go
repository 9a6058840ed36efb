package framework

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Addresses of the default topology. The pod network is one /24 on a bridge
// in the node namespace; the client sits on a separate "external" /24. The
// IPv6 plan (family.go) mirrors it: a /64 each.
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
	// Shape picks the IP families of every link (default ShapeIPv4).
	Shape Shape
	// PodCIDR and ExtCIDR (IPv4) default to DefaultPodCIDR /
	// DefaultExtCIDR; IPv6 uses DefaultPodCIDR6 / DefaultExtCIDR6. The node
	// takes the first host address of each, pods and the client the
	// following ones.
	PodCIDR string
	ExtCIDR string
}

// Pod is one pod network namespace.
type Pod struct {
	Name string // short name, used as the echo server's reply name
	NS   string // network namespace name
	IP   string // the primary family's (or, in a view from For, that family's)
	IPs  []string
}

// Net is a topology's addressing in one IP family.
type Net struct {
	Family   corev1.IPFamily
	NodeIP   string // node address on the external network (InternalIP)
	BridgeIP string // node address on the pod bridge, the pods' gateway
	ClientIP string
	PodCIDR  string
	ExtCIDR  string
}

// Topology is a built (or planned) set of namespaces.
type Topology struct {
	ID       string
	NodeNS   string
	ClientNS string
	NodeName string // Kubernetes Node object name for the node namespace
	// NodeIP, BridgeIP, ClientIP, PodCIDR and ExtCIDR are the primary
	// family's (Nets[0]); a view from For has another family's here.
	NodeIP   string
	BridgeIP string
	ClientIP string
	PodCIDR  string
	ExtCIDR  string
	Pods     []Pod
	Shape    Shape
	Nets     []Net // one per family of Shape, primary first
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

// Families lists the topology's IP families, primary first.
func (t *Topology) Families() []corev1.IPFamily {
	out := make([]corev1.IPFamily, len(t.Nets))
	for i, n := range t.Nets {
		out[i] = n.Family
	}
	return out
}

// For returns a copy of t whose single-family fields (NodeIP, BridgeIP,
// ClientIP, PodCIDR, ExtCIDR and every Pod's IP) are family f's, so that
// code written for one family runs unchanged against another; nil if t has
// no f.
func (t *Topology) For(f corev1.IPFamily) *Topology {
	for _, n := range t.Nets {
		if n.Family != f {
			continue
		}
		v := *t
		v.NodeIP, v.BridgeIP, v.ClientIP, v.PodCIDR, v.ExtCIDR = n.NodeIP, n.BridgeIP, n.ClientIP, n.PodCIDR, n.ExtCIDR
		v.Pods = make([]Pod, len(t.Pods))
		for i, p := range t.Pods {
			p.IP = IPOfFamily(p.IPs, f)
			v.Pods[i] = p
		}
		return &v
	}
	return nil
}

// NewTopologyPlan assigns names and addresses for spec without creating
// anything.
func NewTopologyPlan(spec TopologySpec) (*Topology, error) {
	if spec.ID == "" {
		return nil, fmt.Errorf("topology needs an ID")
	}
	if spec.Shape == "" {
		spec.Shape = ShapeIPv4
	}
	if _, err := ParseShape(string(spec.Shape)); err != nil {
		return nil, err
	}
	t := &Topology{
		ID: spec.ID, NodeNS: spec.ID + "-node", ClientNS: spec.ID + "-client", NodeName: spec.ID + "-node",
		Shape: spec.Shape,
	}
	for i := range spec.Pods {
		name := fmt.Sprintf("pod%d", i)
		t.Pods = append(t.Pods, Pod{Name: name, NS: spec.ID + "-" + name})
	}
	for _, f := range spec.Shape.Families() {
		if err := t.planFamily(spec, f); err != nil {
			return nil, err
		}
	}
	return t.For(t.Nets[0].Family), nil
}

// planFamily adds family f's Net and each pod's address of f.
func (t *Topology) planFamily(spec TopologySpec, f corev1.IPFamily) error {
	def, podCIDR, extCIDR := familyCIDRs(f), "", ""
	if f == corev1.IPv4Protocol {
		podCIDR, extCIDR = spec.PodCIDR, spec.ExtCIDR
	}
	podNet, err := parsePrefix(podCIDR, def.pod, f)
	if err != nil {
		return err
	}
	extNet, err := parsePrefix(extCIDR, def.ext, f)
	if err != nil {
		return err
	}
	podIPs, err := hostAddrs(podNet, len(t.Pods)+1)
	if err != nil {
		return err
	}
	extIPs, err := hostAddrs(extNet, 2)
	if err != nil {
		return err
	}
	t.Nets = append(t.Nets, Net{
		Family: f, NodeIP: extIPs[0], ClientIP: extIPs[1], BridgeIP: podIPs[0],
		PodCIDR: podNet.String(), ExtCIDR: extNet.String(),
	})
	for i := range t.Pods {
		t.Pods[i].IPs = append(t.Pods[i].IPs, podIPs[i+1])
	}
	return nil
}

func parsePrefix(s, def string, f corev1.IPFamily) (netip.Prefix, error) {
	if s == "" {
		s = def
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || FamilyOf(p.Addr().String()) != f {
		return netip.Prefix{}, fmt.Errorf("bad %s CIDR %q: %v", f, s, err)
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
