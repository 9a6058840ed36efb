package iptables

import (
	"crypto/sha256"
	"encoding/base32"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// table is an iptables table this mode writes to.
type table string

const (
	tableMangle table = "mangle"
	tableFilter table = "filter"
	tableNAT    table = "nat"
)

// allTables lists the tables in the order they appear in a restore
// payload.
func allTables() []table { return []table{tableMangle, tableFilter, tableNAT} }

// Top-level chains, with kube-proxy's names so that `iptables -t nat -L`
// reads the way users know.
const (
	chainServices         = "KUBE-SERVICES"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainNodePorts        = "KUBE-NODEPORTS"
	chainPostrouting      = "KUBE-POSTROUTING"
	chainMarkMasq         = "KUBE-MARK-MASQ"
	chainForward          = "KUBE-FORWARD"
	chainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	chainCanary           = "KUBE-PROXY-CANARY"
	// chainKubeletFirewall belongs to kubelet; kube-proxy rewrites it when
	// localhost NodePorts are on and so do we, but we never delete it.
	chainKubeletFirewall = "KUBE-FIREWALL"
)

// Prefixes of the per-service-port chains.
const (
	prefixClusterPolicy = "KUBE-SVC-"
	prefixLocalPolicy   = "KUBE-SVL-"
	prefixFirewall      = "KUBE-FW-"
	prefixExternal      = "KUBE-EXT-"
	prefixEndpoint      = "KUBE-SEP-"
)

// tier orders chains so that every chunk of a sync only jumps to chains
// that already exist: a chain's tier is above the tiers of every chain it
// jumps to. Deletions run in the reverse order.
type tier int

const (
	tierBase      tier = iota // canaries, KUBE-MARK-MASQ, KUBE-POSTROUTING, filter helpers
	tierEndpoint              // KUBE-SEP-*
	tierPolicy                // KUBE-SVC-*, KUBE-SVL-*
	tierExternal              // KUBE-EXT-*
	tierFirewall              // KUBE-FW-*
	tierNodePorts             // nat KUBE-NODEPORTS, filter dispatch chains
	tierServices              // nat KUBE-SERVICES (jumps to KUBE-NODEPORTS)
)

// chainKey names a chain within one family's tables.
type chainKey struct {
	table table
	name  string
}

func servicePrefixes() []string {
	return []string{prefixClusterPolicy, prefixLocalPolicy, prefixFirewall, prefixExternal, prefixEndpoint}
}

// servicePortChains are the names of the chains of one service port.
type servicePortChains struct {
	cluster, local, external, firewall string
}

// hashKey is what kube-proxy hashes for a service port's chain names:
// "ns/name:port" and the protocol in lower case.
func hashKey(name proxier.ServicePortName) string {
	return name.String() + lowerProtocol(name.Protocol)
}

// hashedName is prefix followed by nameHash(in), built with a single
// allocation (the render names ~110k chains at 10k services).
func hashedName(prefix string, in []byte) string {
	h := nameHash(in)
	return prefix + string(h[:])
}

// nameHash is kube-proxy's portProtoHash of in: the first 16 characters
// of base32(sha256(in)). Hashing the same inputs (hashKey, then the
// endpoint for KUBE-SEP chains) keeps chain names stable across restarts
// and identical to kube-proxy's, so a node switched from kube-proxy
// replaces its chains in place.
func nameHash(in []byte) [16]byte {
	sum := sha256.Sum256(in)
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	return [16]byte(enc[:16])
}

func chainsFor(name proxier.ServicePortName) servicePortChains {
	return chainsForKey([]byte(hashKey(name)))
}

// chainsForKey names the chains of the service port whose hashKey is key.
func chainsForKey(key []byte) servicePortChains {
	h := nameHash(key)
	return servicePortChains{
		cluster:  prefixClusterPolicy + string(h[:]),
		local:    prefixLocalPolicy + string(h[:]),
		external: prefixExternal + string(h[:]),
		firewall: prefixFirewall + string(h[:]),
	}
}

// endpointChainName is kube-proxy's servicePortEndpointChainName; endpoint
// is "ip:port" ("[ip]:port" for IPv6).
func endpointChainName(name proxier.ServicePortName, endpoint string) string {
	return hashedName(prefixEndpoint, []byte(hashKey(name)+endpoint))
}

// isServiceChain reports whether a chain is a per-service-port chain of this
// mode (or of kube-proxy's, which uses the same names).
func isServiceChain(name string) bool {
	return slices.ContainsFunc(servicePrefixes(), func(p string) bool { return strings.HasPrefix(name, p) })
}

// tierOf returns the tier of a chain this mode owns, from its name and
// table.
func tierOf(t table, name string) tier {
	switch {
	case strings.HasPrefix(name, prefixEndpoint):
		return tierEndpoint
	case strings.HasPrefix(name, prefixClusterPolicy), strings.HasPrefix(name, prefixLocalPolicy):
		return tierPolicy
	case strings.HasPrefix(name, prefixExternal):
		return tierExternal
	case strings.HasPrefix(name, prefixFirewall):
		return tierFirewall
	case t == tableNAT && name == chainServices:
		return tierServices
	case t == tableNAT && name == chainNodePorts:
		return tierNodePorts
	case t == tableFilter && name != chainForward && name != chainKubeletFirewall && name != chainCanary:
		return tierNodePorts
	}
	return tierBase
}

// ownedTopLevelChains are the fixed chains this mode creates in a table
// (and removes on cleanup). KUBE-FIREWALL is kubelet's and not listed.
func ownedTopLevelChains(t table) []string {
	switch t {
	case tableMangle:
		return []string{chainCanary, chainServiceTraffic, chainNodePortTraffic}
	case tableFilter:
		return []string{chainServices, chainExternalServices, chainNodePorts, chainForward, chainProxyFirewall, chainCanary}
	case tableNAT:
		return []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq, chainCanary}
	}
	return nil
}

// isOwnedChain reports whether Cleanup should remove the chain.
func isOwnedChain(t table, name string) bool {
	if isServiceChain(name) {
		return t == tableNAT
	}
	return slices.Contains(ownedTopLevelChains(t), name)
}

// jumpRule is a rule in a built-in chain that sends traffic into one of
// ours. These live outside the restore payload (other programs own the
// built-in chains) and are ensured one by one on full syncs.
type jumpRule struct {
	table table
	from  string // built-in chain
	to    string // our chain
	args  []string
}

// jumpRules are kube-proxy's iptablesJumpChains, in its order.
func jumpRules(localhostNodePorts, serviceTraffic, ipv4 bool) []jumpRule {
	ctNew := []string{"-m", "conntrack", "--ctstate", "NEW"}
	j := func(t table, from, to string, extra []string, comment string) jumpRule {
		args := append(append([]string{}, extra...), "-m", "comment", "--comment", comment, "-j", to)
		return jumpRule{table: t, from: from, to: to, args: args}
	}
	rules := []jumpRule{
		j(tableFilter, "INPUT", chainExternalServices, ctNew, "kubernetes externally-visible service portals"),
		j(tableFilter, "FORWARD", chainExternalServices, ctNew, "kubernetes externally-visible service portals"),
		j(tableFilter, "INPUT", chainNodePorts, nil, "kubernetes health check service ports"),
		j(tableFilter, "FORWARD", chainServices, ctNew, "kubernetes service portals"),
		j(tableFilter, "OUTPUT", chainServices, ctNew, "kubernetes service portals"),
		j(tableFilter, "FORWARD", chainForward, nil, "kubernetes forwarding rules"),
		j(tableFilter, "INPUT", chainProxyFirewall, ctNew, "kubernetes load balancer firewall"),
		j(tableFilter, "OUTPUT", chainProxyFirewall, ctNew, "kubernetes load balancer firewall"),
		j(tableFilter, "FORWARD", chainProxyFirewall, ctNew, "kubernetes load balancer firewall"),
		j(tableNAT, "OUTPUT", chainServices, nil, "kubernetes service portals"),
		j(tableNAT, "PREROUTING", chainServices, nil, "kubernetes service portals"),
		j(tableNAT, "POSTROUTING", chainPostrouting, nil, "kubernetes postrouting rules"),
	}
	if localhostNodePorts && ipv4 {
		// kubelet installs the same jumps; kube-proxy ensures them too.
		rules = append(rules,
			jumpRule{table: tableFilter, from: "INPUT", to: chainKubeletFirewall, args: []string{"-j", chainKubeletFirewall}},
			jumpRule{table: tableFilter, from: "OUTPUT", to: chainKubeletFirewall, args: []string{"-j", chainKubeletFirewall}},
		)
	}
	if serviceTraffic {
		rules = append(rules, trafficJumps()...)
	}
	return rules
}

// OwnsChain reports whether this mode writes the chain: after a takeover
// such chains are rewritten by the first sync, never swept.
func OwnsChain(t, name string) bool { return isOwnedChain(table(t), name) }
