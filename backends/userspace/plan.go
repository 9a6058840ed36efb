package userspace

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// trafficKind tells a service port's proxy sockets apart.
type trafficKind uint8

const (
	// internalTraffic: cluster-IP traffic (and, with externalTrafficPolicy
	// Local, external destinations reached from pods or the node).
	internalTraffic trafficKind = iota
	// externalTraffic: NodePort, external IP and load-balancer IP traffic,
	// on its own socket only when the policies differ (servicePlan.split).
	externalTraffic
)

func (k trafficKind) String() string {
	if k == externalTraffic {
		return "external"
	}
	return "internal"
}

// socketKey names one proxy socket.
type socketKey struct {
	name   proxier.ServicePortName
	family v1.IPFamily
	kind   trafficKind
}

// socketSpec is what a proxy socket should serve.
type socketSpec struct {
	protocol  v1.Protocol
	port      uint16 // the service port's number
	endpoints []netip.AddrPort
	affinity  time.Duration
	// transparency: which connections are opened from the client's
	// address (nil: none).
	transparency *transparency
}

// servicePlan is one service port of one family, with its endpoint
// selection: the pure input of both the sockets and the rules.
type servicePlan struct {
	sp       *proxier.ServicePort
	family   v1.IPFamily
	internal []netip.AddrPort        // endpoints for cluster-IP traffic
	external []netip.AddrPort        // endpoints for external traffic from outside
	hasAny   bool                    // some usable endpoint exists in the cluster
	local    map[netip.AddrPort]bool // endpoints on this node
	// split: external traffic has its own socket, because the internal
	// and external traffic policies differ and so may the endpoint sets,
	// or because pods are told apart by their input interface (see
	// planFamily). It depends on the service and the configuration only,
	// so sockets never come and go with endpoints.
	split bool
}

// key returns the socket serving traffic of kind k.
func (p *servicePlan) key(k trafficKind) socketKey {
	if !p.split {
		k = internalTraffic
	}
	return socketKey{name: p.sp.Name, family: p.family, kind: k}
}

// proxied reports whether the userspace proxy serves the protocol.
func proxied(proto v1.Protocol) bool {
	return proto == v1.ProtocolTCP || proto == v1.ProtocolUDP
}

// planFamily plans every proxied service port with a cluster IP of the
// family, sorted by name. Endpoint selection is proxier.SelectEndpoints.
//
// byIface says that local traffic is detected by input interface
// (BridgeInterface, InterfaceNamePrefix). An accepted connection does not
// tell the proxy which interface it came in on, so the proxy cannot keep
// pods from the client-address dial (Transparent) of an
// externalTrafficPolicy Local port by their address, as it does with a
// pod CIDR; the rules' "-i" match does it instead: such a port always
// gets an external socket of its own (the only one that dials from client
// addresses), and pod traffic is sent to the internal one.
func planFamily(st *proxier.State, fam v1.IPFamily, byIface bool) []servicePlan {
	var plans []servicePlan
	for name, sp := range st.Services {
		if !proxied(sp.Protocol) {
			continue
		}
		if _, ok := sp.ClusterIP(fam); !ok {
			continue
		}
		sel := proxier.SelectEndpoints(sp, st.Endpoints[name], st.Node, fam)
		plans = append(plans, servicePlan{
			sp:       sp,
			family:   fam,
			internal: addrPorts(sel.Internal(sp)),
			external: addrPorts(sel.External(sp)),
			hasAny:   sel.HasAny,
			local:    localEndpoints(st.Endpoints[name]),
			split:    sp.ExternallyAccessible() && (sp.InternalPolicyLocal != sp.ExternalPolicyLocal || byIface && sp.ExternalPolicyLocal),
		})
	}
	slices.SortFunc(plans, func(a, b servicePlan) int { return compareNames(a.sp.Name, b.sp.Name) })
	return plans
}

// addSpecs adds the sockets the plans need. With externalTrafficPolicy
// Local and inside known (see insideOf), the socket serving external
// traffic opens its connections to local endpoints from the clients'
// addresses.
func addSpecs(specs map[socketKey]socketSpec, plans []servicePlan, inside []netip.Prefix) {
	for i := range plans {
		p := &plans[i]
		affinity := time.Duration(p.sp.AffinityTimeoutSeconds) * time.Second
		var tr *transparency
		if p.sp.ExternalPolicyLocal && inside != nil {
			tr = &transparency{local: p.local, inside: inside}
		}
		internal := socketSpec{protocol: p.sp.Protocol, port: p.sp.Port, endpoints: p.internal, affinity: affinity}
		if !p.split {
			internal.transparency = tr
		}
		specs[p.key(internalTraffic)] = internal
		if p.split {
			specs[p.key(externalTraffic)] = socketSpec{protocol: p.sp.Protocol, port: p.sp.Port, endpoints: p.external, affinity: affinity,
				transparency: tr}
		}
	}
}

func addrPorts(eps []proxier.Endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(eps))
	for _, e := range eps {
		out = append(out, netip.AddrPortFrom(e.IP.Unmap(), e.Port))
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return slices.Compact(out)
}

func compareNames(a, b proxier.ServicePortName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
}
