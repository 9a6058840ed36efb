package proxier

import (
	"fmt"
	"net/netip"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ServicePortName identifies one port of one Service: namespace, name, port
// name and protocol. It is the unit every backend programs.
type ServicePortName struct {
	types.NamespacedName
	Port     string
	Protocol v1.Protocol
}

// String gives "ns/name:port" (or "ns/name" for an unnamed port), the form
// kube-proxy prints in rule comments and logs.
func (n ServicePortName) String() string {
	if n.Port == "" {
		return n.Namespace + "/" + n.Name
	}
	return n.Namespace + "/" + n.Name + ":" + n.Port
}

// ServicePort is the proxier's view of one Service port, validated and
// normalised. Addresses of both IP families are kept; a backend programs the
// family it serves (IPFamily filters them).
type ServicePort struct {
	Name     ServicePortName
	Protocol v1.Protocol
	Port     uint16
	NodePort uint16

	ClusterIPs      []netip.Addr
	ExternalIPs     []netip.Addr
	LoadBalancerIPs []netip.Addr
	// LoadBalancerSourceRanges restricts traffic to the LB IPs.
	LoadBalancerSourceRanges []netip.Prefix

	// AffinityTimeoutSeconds > 0 means sessionAffinity ClientIP.
	AffinityTimeoutSeconds int32

	ExternalPolicyLocal bool // externalTrafficPolicy: Local
	InternalPolicyLocal bool // internalTrafficPolicy: Local
	HealthCheckNodePort uint16
	// TrafficDistribution is spec.trafficDistribution ("" when unset).
	TrafficDistribution string
}

// ExternallyAccessible reports whether the port can be reached from outside
// the cluster (NodePort, ExternalIPs or LoadBalancer IPs).
func (sp *ServicePort) ExternallyAccessible() bool {
	return sp.NodePort != 0 || len(sp.ExternalIPs) > 0 || len(sp.LoadBalancerIPs) > 0
}

// UsesClusterEndpoints reports whether any traffic to the port is sent to
// endpoints regardless of node. That is the case under the Cluster
// internal policy, and for every externally accessible port: even with
// externalTrafficPolicy Local, pods and the node itself reaching an
// external address are "short-circuited" to any endpoint (kube-proxy's
// semantics, KEP-1669/KEP-2086).
func (sp *ServicePort) UsesClusterEndpoints() bool {
	return !sp.InternalPolicyLocal || sp.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether any traffic to the port is restricted
// to node-local endpoints.
func (sp *ServicePort) UsesLocalEndpoints() bool {
	return sp.InternalPolicyLocal || (sp.ExternallyAccessible() && sp.ExternalPolicyLocal)
}

// ClusterIP returns the port's cluster IP of the given family, if any.
func (sp *ServicePort) ClusterIP(family v1.IPFamily) (netip.Addr, bool) {
	for _, ip := range sp.ClusterIPs {
		if FamilyOf(ip) == family {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// Endpoint is one backend address of a service port, merged from all the
// service's EndpointSlices. The fields are ordered to keep it small (56
// bytes): a State holds one per endpoint and service port.
type Endpoint struct {
	IP netip.Addr
	// NodeName is the node the endpoint runs on, "" if unknown.
	NodeName string
	// Topology is the endpoint's zone and the topology hints the slice
	// controller wrote; nil when it has neither. Endpoints share it (see
	// topologyInterner): never modify it.
	Topology *EndpointTopology
	Port     uint16

	Ready       bool
	Serving     bool
	Terminating bool
	// IsLocal is true when the endpoint runs on this node.
	IsLocal bool
}

// EndpointTopology is where an endpoint runs and the topology hints of
// the slice controller (hints.forZones / hints.forNodes).
type EndpointTopology struct {
	Zone      string
	ZoneHints []string
	NodeHints []string
}

// Zone returns the endpoint's zone, "" if unknown.
func (e Endpoint) Zone() string {
	if e.Topology == nil {
		return ""
	}
	return e.Topology.Zone
}

// ZoneHints returns the zones the endpoint is hinted for.
func (e Endpoint) ZoneHints() []string {
	if e.Topology == nil {
		return nil
	}
	return e.Topology.ZoneHints
}

// NodeHints returns the nodes the endpoint is hinted for.
func (e Endpoint) NodeHints() []string {
	if e.Topology == nil {
		return nil
	}
	return e.Topology.NodeHints
}

// String gives "ip:port" ("[ip]:port" for IPv6).
func (e Endpoint) String() string {
	return netip.AddrPortFrom(e.IP, e.Port).String()
}

// Key identifies an endpoint within one service port.
func (e Endpoint) Key() netip.AddrPort { return netip.AddrPortFrom(e.IP, e.Port) }

// FamilyOf returns the IP family of an address.
func FamilyOf(ip netip.Addr) v1.IPFamily {
	if ip.Is4() || ip.Is4In6() {
		return v1.IPv4Protocol
	}
	return v1.IPv6Protocol
}

// NodeInfo is what the proxier knows about the node it runs on.
type NodeInfo struct {
	Name      string
	Zone      string
	Labels    map[string]string
	Addresses []netip.Addr
	// PodCIDRs are the node's own pod CIDRs (spec.podCIDRs), masked; empty
	// until the node has them.
	PodCIDRs []netip.Prefix
}

// portString formats a port for logs and comments.
func portString(p uint16) string { return strconv.Itoa(int(p)) }

// describe formats a service port with its cluster IPs for logs.
func (sp *ServicePort) describe() string {
	return fmt.Sprintf("%s %v:%s/%s", sp.Name, sp.ClusterIPs, portString(sp.Port), sp.Protocol)
}
