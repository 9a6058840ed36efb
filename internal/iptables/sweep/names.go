package sweep

import "strings"

// Tables the sweep visits, in order.
func Tables() []string { return []string{"mangle", "filter", "nat"} }

// fixedChains are the top-level chains of every iptables-based proxy mode
// by table: kube-proxy's iptables mode (and switchyard's), kube-proxy's and
// switchyard's ipvs modes, and the userspace mode's portal chains.
var fixedChains = map[string][]string{
	"mangle": {"KUBE-PROXY-CANARY", "KUBE-PORTALS-MARK"},
	"filter": {
		"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-FORWARD",
		"KUBE-PROXY-FIREWALL", "KUBE-PROXY-CANARY", // iptables mode
		"KUBE-SOURCE-RANGES-FIREWALL", "KUBE-NODE-PORT", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER", // ipvs mode
		"KUBE-PORTALS-FILTER", // userspace mode
	},
	"nat": {
		"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-PROXY-CANARY", // iptables mode
		"KUBE-NODE-PORT", "KUBE-LOAD-BALANCER", "KUBE-FIREWALL", "KUBE-IPVS-INTERNAL", // ipvs mode
		"KUBE-PORTALS-CONTAINER", "KUBE-PORTALS-HOST", "KUBE-NODEPORT-CONTAINER", "KUBE-NODEPORT-HOST", "KUBE-PORTALS-MASQ", // userspace
	},
}

// servicePrefixes name the per-service and per-endpoint nat chains of the
// iptables mode (KUBE-XLB- is the pre-1.24 name of KUBE-SVL-).
var servicePrefixes = []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-", "KUBE-XLB-"}

// Known reports whether a service proxy creates a chain of this name in
// this table. kubelet's chains are never known: filter's KUBE-FIREWALL,
// KUBE-KUBELET-CANARY and KUBE-IPTABLES-HINT belong to it.
func Known(table, chain string) bool {
	for _, c := range fixedChains[table] {
		if c == chain {
			return true
		}
	}
	if table != "nat" {
		return false
	}
	for _, p := range servicePrefixes {
		if strings.HasPrefix(chain, p) && len(chain) > len(p) {
			return true
		}
	}
	return false
}
