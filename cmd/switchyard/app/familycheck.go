package app

import (
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// checkFamilyConfig makes kube-proxy's checks of settings against the
// primary family (checkBadConfig, checkBadIPConfig) once the families are
// decided. Problems are logged; those kube-proxy has always refused (a
// cluster CIDR or node pod CIDR of the wrong family only, in the mode that
// needs it) are returned as errors.
func checkFamilyConfig(o *Options) error {
	if err := errors.Join(nodePortFamilyProblems(o)...); err != nil {
		klog.ErrorS(err, "switchyard configuration may be incomplete or incorrect")
	}
	problems, fatal := ipFamilyProblems(o)
	err := errors.Join(problems...)
	if err != nil && fatal {
		return fmt.Errorf("configuration is incorrect: %w", err)
	}
	if err != nil {
		klog.ErrorS(err, "switchyard configuration may be incomplete or incorrect")
	}
	return nil
}

// nodePortFamilyProblems is kube-proxy's checkBadConfig: NodePorts not
// restricted in a family that seems to be in use.
func nodePortFamilyProblems(o *Options) []error {
	primary, other := o.PrimaryFamily, otherFamily(o.PrimaryFamily)
	ofPrimary := countFamily(o.NodePortAddresses, primary)
	switch {
	case len(o.NodePortAddresses) == 0:
		return []error{errors.New("nodePortAddresses is unset; NodePort connections will be accepted on all local IPs. Consider using `--nodeport-addresses primary`")}
	case anyDualStackConfig(o) && ofPrimary == len(o.NodePortAddresses):
		return []error{fmt.Errorf("cluster appears to be dual-stack but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", primary, other)}
	case ofPrimary == 0:
		return []error{fmt.Errorf("cluster appears to be %s-primary but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", primary, other, primary)}
	}
	return nil
}

// anyDualStackConfig: some setting names CIDRs of both families.
func anyDualStackConfig(o *Options) bool {
	for _, cidrs := range [][]netip.Prefix{o.ClusterCIDRs, o.NodePortAddresses, o.IPVS.ExcludeCIDRs, o.NodePodCIDRs} {
		if hasFamily(cidrs, v1.IPv4Protocol) && hasFamily(cidrs, v1.IPv6Protocol) {
			return true
		}
	}
	return false
}

// ipFamilyProblems is kube-proxy's checkBadIPConfig: settings that name
// only the other family's addresses.
func ipFamilyProblems(o *Options) (problems []error, fatal bool) {
	bad := otherFamily(o.PrimaryFamily)
	kind := string(o.PrimaryFamily) + "-only"
	if dualStack(o) {
		kind = string(o.PrimaryFamily) + "-primary"
	}
	mode := o.LocalDetector.Mode
	if onlyFamily(o.ClusterCIDRs, bad) {
		problems = append(problems, fmt.Errorf("cluster is %s but clusterCIDRs contains only %s addresses", kind, bad))
		fatal = fatal || (mode == proxier.LocalModeClusterCIDR && !dualStack(o))
	}
	if onlyFamily(o.NodePodCIDRs, bad) {
		problems = append(problems, fmt.Errorf("cluster is %s but node.spec.podCIDRs contains only %s addresses", kind, bad))
		fatal = fatal || mode == proxier.LocalModeNodeCIDR
	}
	if dualStack(o) {
		return problems, fatal
	}
	if onlyFamily(o.IPVS.ExcludeCIDRs, bad) {
		problems = append(problems, fmt.Errorf("cluster is %s but ipvs.excludeCIDRs contains only %s addresses", kind, bad))
	}
	for _, b := range [][2]string{{"healthzBindAddress", o.HealthzBindAddress}, {"metricsBindAddress", o.MetricsBindAddress}} {
		if ap, err := netip.ParseAddrPort(b[1]); err == nil && !ap.Addr().IsUnspecified() && proxier.FamilyOf(ap.Addr()) == bad {
			problems = append(problems, fmt.Errorf("cluster is %s but %s is %s", kind, b[0], bad))
		}
	}
	return problems, fatal
}

func hasFamily(cidrs []netip.Prefix, f v1.IPFamily) bool { return countFamily(cidrs, f) > 0 }

// countFamily counts the CIDRs of family f (0.0.0.0/0 and ::/0 included,
// as kube-proxy's MapCIDRsByIPFamily counts them).
func countFamily(cidrs []netip.Prefix, f v1.IPFamily) int {
	n := 0
	for _, p := range cidrs {
		if proxier.FamilyOfPrefix(p) == f {
			n++
		}
	}
	return n
}

// onlyFamily: cidrs is not empty and every one is of family f.
func onlyFamily(cidrs []netip.Prefix, f v1.IPFamily) bool {
	return len(cidrs) > 0 && !hasFamily(cidrs, otherFamily(f))
}
