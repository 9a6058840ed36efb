package nftables

import (
	"crypto/sha256"
	"encoding/base32"
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
	setNodePortIPs      = "nodeport-ips"
	setHairpin          = "hairpin-endpoints"
	setAffinity         = "affinity"
	// Endpoint groups live in shared interval maps "endpoints-<n>".
	endpointMapPrefix = "endpoints-"
)

// Prefixes of the per-service-port chains, as upstream's.
const (
	prefixService  = "service-"
	prefixExternal = "external-"
	prefixFirewall = "firewall-"
)

// portChains are the names of one service port's chains.
type portChains struct{ service, external, firewall string }

// chainsOf names a service port's chains the way upstream kube-proxy's
// nftables mode does: prefix, an 8-character hash, then
// "namespace/name/protocol/port" so that `nft list` is readable.
func chainsOf(n proxier.ServicePortName) portChains {
	base := n.Namespace + "/" + n.Name + "/" + strings.ToLower(string(n.Protocol)) + "/" + n.Port
	sum := sha256.Sum256([]byte(base))
	suffix := base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + base
	return portChains{
		service:  prefixService + suffix,
		external: prefixExternal + suffix,
		firewall: prefixFirewall + suffix,
	}
}
