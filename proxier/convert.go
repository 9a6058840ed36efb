package proxier

import (
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// InvalidFunc is told about every object (or part of one) the proxier skips
// because it is malformed. kind is "Service", "EndpointSlice" or
// "Endpoint"; reason is a short stable word for a metric label.
type InvalidFunc func(kind, reason string)

// ServicePortsFromService converts a Service into its service ports,
// skipping (with a log line and a call to invalid) what the proxier cannot
// program. ExternalName and headless services have no ports to program.
func ServicePortsFromService(svc *v1.Service, invalid InvalidFunc) map[ServicePortName]*ServicePort {
	if svc == nil || !serviceIsProxied(svc) {
		return nil
	}
	tally := newSkipTally(invalid)
	defer tally.log("Skipped invalid parts of a Service (a buggy controller?); details at -v=2", svc)
	return servicePorts(svc, tally.record)
}

func servicePorts(svc *v1.Service, invalid InvalidFunc) map[ServicePortName]*ServicePort {
	clusterIPs, ok := parseClusterIPs(svc)
	if !ok {
		invalid("Service", "cluster-ip")
		klog.V(2).InfoS("Skipping service with an invalid cluster IP", "service", klog.KObj(svc), "clusterIPs", svc.Spec.ClusterIPs)
		return nil
	}
	common := commonServicePort(svc, clusterIPs, invalid)
	out := make(map[ServicePortName]*ServicePort, len(svc.Spec.Ports))
	nsn := types.NamespacedName{Namespace: intern(svc.Namespace), Name: svc.Name}
	for i := range svc.Spec.Ports {
		sp, err := convertPort(common, nsn, &svc.Spec.Ports[i])
		if err != nil {
			invalid("Service", "port")
			klog.V(2).InfoS("Skipping invalid service port", "service", klog.KObj(svc), "port", svc.Spec.Ports[i].Name, "err", err)
			continue
		}
		if _, dup := out[sp.Name]; dup {
			invalid("Service", "duplicate-port")
			klog.V(2).InfoS("Skipping duplicate service port", "service", klog.KObj(svc), "port", sp.Name.Port)
			continue
		}
		out[sp.Name] = sp
	}
	return out
}

// serviceIsProxied is false for ExternalName and headless services: they get
// no rules in any mode.
func serviceIsProxied(svc *v1.Service) bool {
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return false
	}
	ip := svc.Spec.ClusterIP
	return ip != "" && ip != v1.ClusterIPNone
}

func parseClusterIPs(svc *v1.Service) ([]netip.Addr, bool) {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 {
		raw = []string{svc.Spec.ClusterIP}
	}
	ips := make([]netip.Addr, 0, len(raw))
	for _, s := range raw {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			return nil, false
		}
		ips = append(ips, ip.Unmap())
	}
	return ips, true
}

// commonServicePort holds the fields shared by every port of a service.
func commonServicePort(svc *v1.Service, clusterIPs []netip.Addr, invalid InvalidFunc) ServicePort {
	sp := ServicePort{
		ClusterIPs:          clusterIPs,
		ExternalIPs:         parseAddrs(svc, svc.Spec.ExternalIPs, "external-ip", invalid),
		ExternalPolicyLocal: svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal,
		InternalPolicyLocal: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
	}
	if svc.Spec.TrafficDistribution != nil {
		sp.TrafficDistribution = intern(*svc.Spec.TrafficDistribution)
	}
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
		sp.LoadBalancerIPs = loadBalancerIPs(svc, invalid)
		sp.LoadBalancerSourceRanges = parsePrefixes(svc, invalid)
	}
	if sp.ExternalPolicyLocal && validPort(svc.Spec.HealthCheckNodePort) {
		sp.HealthCheckNodePort = uint16(svc.Spec.HealthCheckNodePort)
	}
	sp.AffinityTimeoutSeconds = affinityTimeout(svc)
	return sp
}

func affinityTimeout(svc *v1.Service) int32 {
	if svc.Spec.SessionAffinity != v1.ServiceAffinityClientIP {
		return 0
	}
	cfg := svc.Spec.SessionAffinityConfig
	if cfg != nil && cfg.ClientIP != nil && cfg.ClientIP.TimeoutSeconds != nil && *cfg.ClientIP.TimeoutSeconds > 0 {
		return *cfg.ClientIP.TimeoutSeconds
	}
	return v1.DefaultClientIPServiceAffinitySeconds
}

func loadBalancerIPs(svc *v1.Service, invalid InvalidFunc) []netip.Addr {
	var raw []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		// ipMode Proxy means the load balancer delivers to the node with
		// its own destination, so the node must not capture the IP.
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode == v1.LoadBalancerIPModeProxy) {
			continue
		}
		raw = append(raw, ing.IP)
	}
	return parseAddrs(svc, raw, "loadbalancer-ip", invalid)
}

func parseAddrs(svc *v1.Service, raw []string, what string, invalid InvalidFunc) []netip.Addr {
	var out []netip.Addr
	for _, s := range raw {
		ip, err := netip.ParseAddr(s)
		if err != nil || ip.Zone() != "" {
			invalid("Service", what)
			klog.V(2).InfoS("Ignoring invalid address on service", "service", klog.KObj(svc), "field", what, "value", s)
			continue
		}
		out = append(out, ip.Unmap())
	}
	return out
}

func parsePrefixes(svc *v1.Service, invalid InvalidFunc) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			invalid("Service", "source-range")
			klog.V(2).InfoS("Ignoring invalid loadBalancerSourceRange", "service", klog.KObj(svc), "value", s)
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

func convertPort(common ServicePort, nsn types.NamespacedName, p *v1.ServicePort) (*ServicePort, error) {
	if !validProtocol(p.Protocol) {
		return nil, fmt.Errorf("unsupported protocol %q", p.Protocol)
	}
	if !validPort(p.Port) {
		return nil, fmt.Errorf("port %d out of range", p.Port)
	}
	if p.NodePort != 0 && !validPort(p.NodePort) {
		return nil, fmt.Errorf("nodePort %d out of range", p.NodePort)
	}
	sp := common
	proto := canonicalProtocol(p.Protocol)
	sp.Name = ServicePortName{NamespacedName: nsn, Port: intern(p.Name), Protocol: proto}
	sp.Protocol = proto
	sp.Port = uint16(p.Port)
	sp.NodePort = uint16(p.NodePort)
	return &sp, nil
}

func validPort(p int32) bool { return p > 0 && p <= 65535 }

func validProtocol(p v1.Protocol) bool {
	return p == v1.ProtocolTCP || p == v1.ProtocolUDP || p == v1.ProtocolSCTP
}
