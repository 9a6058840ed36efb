package userspace

import (
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// transparency decides which connections a proxy socket opens from the
// client's own address (Config.Transparent; see doc.go, "Client
// addresses"). Only to endpoints on this node: their replies to the
// client's address come back through this node, where policy routing
// hands them to the proxy's socket. An endpoint on another node would
// answer the client directly, which knows nothing of that connection.
// Only for clients outside the pod network and the node: a pod's reply
// to another pod on the same bridge never passes this node's routing.
type transparency struct {
	local  map[netip.AddrPort]bool // endpoints on this node
	inside []netip.Prefix          // pod CIDR, node addresses, loopback
}

// from reports whether a connection of client to ep is opened from the
// client's address.
func (t *transparency) from(client netip.Addr, ep netip.AddrPort) bool {
	if t == nil || !t.local[ep] || !client.IsValid() || client.IsLoopback() {
		return false
	}
	return !slices.ContainsFunc(t.inside, func(p netip.Prefix) bool { return p.Contains(client) })
}

// insideOf lists the addresses of fam never dialed from, or nil when the
// backend does not dial from clients' addresses in fam: Transparent is
// off, there is no policy routing, or no local-traffic detector tells
// pods apart. With a source-CIDR detector (ClusterCIDR, NodeCIDR) the
// proxy keeps pods out by address; with an interface detector the rules
// keep them off the sockets that dial from clients (planFamily), so only
// the node's own addresses are listed.
func insideOf(cfg *Config, fam v1.IPFamily, st *proxier.State) []netip.Prefix {
	local := cfg.LocalDetector.Match(fam, st.Node)
	if !cfg.Transparent || cfg.Routing == nil || !local.IsImplemented() {
		return nil
	}
	inside := []netip.Prefix{} // non-nil: dial from clients
	if local.CIDR.IsValid() {
		inside = append(inside, local.CIDR)
	}
	for _, list := range [][]netip.Addr{cfg.NodeIPs, st.Node.Addresses} {
		for _, ip := range list {
			if ip = ip.Unmap(); familyOf(ip) == fam {
				inside = append(inside, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return inside
}

// localEndpoints is the set of a service port's endpoints on this node.
func localEndpoints(eps []proxier.Endpoint) map[netip.AddrPort]bool {
	local := map[netip.AddrPort]bool{}
	for _, e := range eps {
		if e.IsLocal {
			local[netip.AddrPortFrom(e.IP.Unmap(), e.Port)] = true
		}
	}
	return local
}
