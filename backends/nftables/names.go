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
// as upstream kube-proxy's nftables mode, so is the name.
const (
	chainFilterPrerouting = "filter-prerouting"
	chainFilterOutput     = "filter-output"
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
	setNoEndpoints      = "no-endpoint-services"
	setNoEndpointPorts  = "no-endpoint-nodeports"
	setHairpin          = "hairpin-endpoints"
	// Endpoint groups live in shared interval maps "endpoints-<n>".
	endpointMapPrefix = "endpoints-"
)

// Prefixes of the per-service-port chains, as upstream's.
const (
	prefixService  = "service-"
	prefixExternal = "external-"
	prefixFirewall = "firewall-"
	prefixAffinity = "affinity-"
)

// affinitySetName names the set of clients of one endpoint of a service
// port, as upstream: "affinity-<hash>-ns/name/proto/port__ip/port".
func affinitySetName(n proxier.ServicePortName, ep netip.AddrPort) string {
	base := portBase(n) + "__" + ep.Addr().String() + "/" + strconv.Itoa(int(ep.Port()))
	return prefixAffinity + hash8(base) + "-" + base
}

func portBase(n proxier.ServicePortName) string {
	return n.Namespace + "/" + n.Name + "/" + strings.ToLower(string(n.Protocol)) + "/" + n.Port
}

func hash8(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:8]
}

// isAffinitySet tells the sets the packet path fills.
func isAffinitySet(name string) bool { return strings.HasPrefix(name, prefixAffinity) }

// portChains are the names of one service port's chains.
type portChains struct{ service, external, firewall string }

// chainsOf names a service port's chains the way upstream kube-proxy's
// nftables mode does: prefix, an 8-character hash, then
// "namespace/name/protocol/port" so that `nft list` is readable.
func chainsOf(n proxier.ServicePortName) portChains {
	base := portBase(n)
	suffix := hash8(base) + "-" + base
	return portChains{
		service:  prefixService + suffix,
		external: prefixExternal + suffix,
		firewall: prefixFirewall + suffix,
	}
}
