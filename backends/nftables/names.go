package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Names of the table-wide chains and sets. Where the structure is the same
// as upstream kube-proxy's nftables mode, so is the name; where it differs,
// so does the name. That keeps the table adoptable by kube-proxy on a
// rollback: kube-proxy deletes and recreates base chains of its own names
// (so switchyard has no others), adds sets and maps of its names (so a
// same-named object here has kube-proxy's type), treats any chain whose name
// holds a "/" as its own stale service chain and any set named "affinity-*"
// as its own stale affinity set (so switchyard names none so). What
// kube-proxy does not know it leaves in place, unreachable from any hook.
const (
	chainFilterPrerouting = "filter-prerouting-pre-dnat"
	chainFilterOutput     = "filter-output-pre-dnat"
	chainNATPrerouting    = "nat-prerouting"
	chainNATOutput        = "nat-output"
	chainNATPostrouting   = "nat-postrouting"
	chainServices         = "services"
	chainFirewallCheck    = "firewall-check"
	chainEndpointsCheck   = "service-endpoints-check"
	chainMarkMasq         = "mark-for-masquerade"
	chainMasquerading     = "masquerading"

	setServiceIPs       = "service-ips"
	setServiceNodePorts = "service-nodeports"
	setFirewallIPs      = "firewall-ips"
	setNoEndpoints      = "services-without-endpoints"
	setNoEndpointPorts  = "nodeports-without-endpoints"
	setHairpin          = "hairpin-endpoints"
	setClusterIPPorts   = "cluster-ip-ports"
	// The counter sets of --service-traffic-metrics (servicetraffic.go).
	setServiceTraffic     = "service-traffic"
	setServiceConnections = "service-connections"
	// NodePorts: the ports counted (a plain set, so that only their
	// packets pay the local-address check) and their two counter sets.
	setNodePortCounted     = "nodeport-counted"
	setNodePortTraffic     = "nodeport-traffic"
	setNodePortConnections = "nodeport-connections"
	// Endpoint groups live in shared interval maps "endpoints-<n>".
	endpointMapPrefix = "endpoints-"
)

// Prefixes of the per-service-port chains, as upstream's; the sets of
// ClientIP affinity clients are "sticky-", not upstream's "affinity-".
const (
	prefixService  = "service-"
	prefixExternal = "external-"
	prefixFirewall = "firewall-"
	prefixAffinity = "sticky-"
)

// affinitySetName names the set of clients of one endpoint of a service
// port: "sticky-<hash>-ns.name.proto.port__ip/port".
func affinitySetName(n proxier.ServicePortName, ep netip.AddrPort) string {
	base := portBase(n) + "__" + ep.Addr().String() + "/" + strconv.Itoa(int(ep.Port()))
	return prefixAffinity + hash8(base) + "-" + base
}

// portBase is "namespace.name.protocol.port": none of the four can hold a
// dot (DNS labels, IANA service names), and unlike upstream's slashes, a
// dot does not make kube-proxy take the chain for one of its own.
func portBase(n proxier.ServicePortName) string {
	return n.Namespace + "." + n.Name + "." + strings.ToLower(string(n.Protocol)) + "." + n.Port
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:8]
}

// isAffinitySet tells the sets the packet path fills.
func isAffinitySet(name string) bool { return strings.HasPrefix(name, prefixAffinity) }

// portChains are the names of one service port's chains.
type portChains struct{ service, external, firewall string }

// chainsOf names a service port's chains: prefix, an 8-character hash, then
// "namespace.name.protocol.port" so that `nft list` is readable.
func chainsOf(n proxier.ServicePortName) portChains {
	base := portBase(n)
	suffix := hash8(base) + "-" + base
	return portChains{
		service:  prefixService + suffix,
		external: prefixExternal + suffix,
		firewall: prefixFirewall + suffix,
	}
}

// SwitchyardObject tells whether a chain, set or map of the kube-proxy table
// has a name only switchyard gives: what is left of switchyard's ruleset,
// unreachable, after kube-proxy's nftables mode adopted the table.
func SwitchyardObject(name string) bool {
	switch name {
	case setNoEndpoints, setNoEndpointPorts, setHairpin, setClusterIPPorts, chainMarkMasq:
		return true
	}
	if strings.HasPrefix(name, prefixAffinity) || strings.HasPrefix(name, endpointMapPrefix) {
		return true
	}
	for _, p := range []string{prefixService, prefixExternal, prefixFirewall} {
		if strings.HasPrefix(name, p) && strings.Count(name, ".") >= 3 && !strings.Contains(name, "/") {
			return true
		}
	}
	return false
}

// sharedNames are the objects switchyard writes under upstream's names.
var sharedNames = map[string]bool{
	chainFilterPrerouting: true, chainFilterOutput: true, chainNATPrerouting: true,
	chainNATOutput: true, chainNATPostrouting: true, chainServices: true,
	chainFirewallCheck: true, chainEndpointsCheck: true, chainMasquerading: true,
	setServiceIPs: true, setServiceNodePorts: true, setFirewallIPs: true,
}

// holdsForeignObjects tells a table holding anything this version of
// switchyard would not write: kube-proxy's objects (after a rollback
// kube-proxy adopted the table, which keeps no comment then), or an
// earlier switchyard's names and set flags. Such a table is replaced,
// not rewritten in place.
func holdsForeignObjects(objs TableObjects) bool {
	for _, names := range [][]string{objs.Chains, objs.Sets} {
		for _, n := range names {
			if !sharedNames[n] && !SwitchyardObject(n) {
				return true
			}
		}
	}
	return false
}
