package nftables

import (
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// dnatRules are the picker's rules, or none when there is no picker.
func dnatRules(p picker, match ...ruleset.Expr) []ruleset.Rule {
	if p == nil {
		return nil
	}
	return p(match...)
}

// serviceChain handles traffic to the cluster IP (kube-proxy's KUBE-SVC /
// KUBE-SVL): masquerade what does not come from a pod, then DNAT to the
// internal group. Under internalTrafficPolicy Local with no local
// endpoint the DNAT finds nothing and the packet is dropped.
func serviceChain(v *portView, cluster, local picker) *ruleset.Chain {
	c := &ruleset.Chain{Name: v.chains.service} // masquerading: clusterIPMasquerade
	if v.sp.InternalPolicyLocal {
		c.Rules = append(c.Rules, dnatRules(local)...)
		c.Rules = append(c.Rules, ruleset.R(verdict("drop")).WithComment("no local endpoints"))
		return c
	}
	c.Rules = append(c.Rules, dnatRules(cluster)...)
	return c
}

// externalChain handles NodePort, ExternalIP and LoadBalancer IP traffic
// (kube-proxy's KUBE-EXT). Under externalTrafficPolicy Cluster it is
// masqueraded and sent to any endpoint. Under Local, traffic from pods and
// from the node itself is short-circuited to any endpoint (the node's
// masqueraded), and the rest goes to this node's endpoints only, or is
// dropped when there is none. pods tells pods' traffic apart.
func externalChain(v *portView, pods proxier.LocalMatch, cluster, local picker) *ruleset.Chain {
	c := &ruleset.Chain{Name: v.chains.external}
	if !v.sp.ExternalPolicyLocal {
		c.Rules = append(c.Rules, ruleset.R(jump(chainMarkMasq)))
		c.Rules = append(c.Rules, dnatRules(cluster)...)
		return c
	}
	// Short-circuited traffic goes to the Cluster group, which an
	// externally accessible port always has; its endpoints, not their
	// number, are data, so the rules do not depend on them.
	short := cluster
	if short == nil {
		short = local
	}
	if pods.IsImplemented() {
		c.Rules = append(c.Rules, withComment(dnatRules(short, localExpr(pods, false)), "short-circuit pod traffic")...)
	}
	fromNode := ruleset.FibLocal{Field: ruleset.FieldSaddr}
	c.Rules = append(c.Rules, ruleset.R(fromNode, jump(chainMarkMasq)).WithComment("masquerade local traffic"))
	c.Rules = append(c.Rules, withComment(dnatRules(short, fromNode), "short-circuit local traffic")...)
	c.Rules = append(c.Rules, dnatRules(local)...)
	c.Rules = append(c.Rules, ruleset.R(verdict("drop")).WithComment("no local endpoints"))
	return c
}

// localExpr is the local-traffic match (negated: "not local"), as
// kube-proxy's IfLocalNFT / IfNotLocalNFT: "ip saddr CIDR" or "iifname".
func localExpr(m proxier.LocalMatch, negated bool) ruleset.Expr {
	if m.ByInterface() {
		return ruleset.IifName{Name: m.Interface, Prefix: m.Prefix, Neq: negated}
	}
	return ruleset.Cmp{Field: ruleset.FieldSaddr, Neq: negated, Prefix: m.CIDR}
}

func withComment(rs []ruleset.Rule, comment string) []ruleset.Rule {
	for i := range rs {
		rs[i].Comment = comment
	}
	return rs
}

// firewallChain enforces loadBalancerSourceRanges on the LB IPs (kube-
// proxy's KUBE-FW): allowed sources return to the filter chain, the rest
// is dropped. nil when the port has no source ranges in this family.
func firewallChain(v *portView) *ruleset.Chain {
	if len(v.lbIPs) == 0 || len(v.sourceRanges) == 0 {
		return nil
	}
	c := &ruleset.Chain{Name: v.chains.firewall}
	for _, p := range v.sourceRanges {
		c.Rules = append(c.Rules, ruleset.R(ruleset.Cmp{Field: ruleset.FieldSaddr, Prefix: p.Masked()}, verdict("return")))
	}
	c.Rules = append(c.Rules, ruleset.R(verdict("drop")).WithComment("other sources"))
	return c
}
