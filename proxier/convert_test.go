package proxier

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// cmpAddrs lets go-cmp compare netip values by ==.
var cmpAddrs = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

// wantPort builds the expected ServicePort for port name/proto/port of
// service "svc" with cluster IP 10.96.0.10, then applies mods.
func wantPort(name string, proto v1.Protocol, port uint16, mods ...func(*ServicePort)) *ServicePort {
	sp := &ServicePort{
		Name:       spn("svc", name, proto),
		Protocol:   proto,
		Port:       port,
		ClusterIPs: addrs("10.96.0.10"),
	}
	for _, m := range mods {
		m(sp)
	}
	return sp
}

func portsByName(ps ...*ServicePort) map[ServicePortName]*ServicePort {
	out := map[ServicePortName]*ServicePort{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out
}

// lbService makes a service a LoadBalancer with node port 30080 and
// ingress IPs of every kind.
func lbService(s *v1.Service) {
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.Ports[0].NodePort = 30080
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
		{IP: "192.0.2.1"},
		{IP: "192.0.2.2", IPMode: ptr.To(v1.LoadBalancerIPModeVIP)},
		{IP: "192.0.2.3", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)},
		{Hostname: "lb.example.com"},
	}
}

// convertCase converts svc and expects ports and InvalidFunc calls.
type convertCase struct {
	name        string
	svc         *v1.Service
	want        map[ServicePortName]*ServicePort
	wantInvalid []string
}

func runConvertCases(t *testing.T, tests []convertCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &invalidRecorder{}
			got := ServicePortsFromService(tc.svc, rec.fn)
			if d := cmp.Diff(tc.want, got, cmpAddrs); d != "" {
				t.Errorf("service ports (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantInvalid, rec.got()); d != "" {
				t.Errorf("invalid calls (-want +got):\n%s", d)
			}
		})
	}
}

func TestServicePortsFromService(t *testing.T) {
	runConvertCases(t, []convertCase{{
		name: "cluster IP",
		svc:  makeService("svc"),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80)),
	}, {
		name: "multi-port, dual-stack",
		svc: makeService("svc", withClusterIPs("10.96.0.10", "fd00::10"),
			withPorts(tcpPort("http", 80), udpPort("dns", 53), v1.ServicePort{Name: "sctp", Port: 9, Protocol: v1.ProtocolSCTP})),
		want: portsByName(
			wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) { sp.ClusterIPs = addrs("10.96.0.10", "fd00::10") }),
			wantPort("dns", v1.ProtocolUDP, 53, func(sp *ServicePort) { sp.ClusterIPs = addrs("10.96.0.10", "fd00::10") }),
			wantPort("sctp", v1.ProtocolSCTP, 9, func(sp *ServicePort) { sp.ClusterIPs = addrs("10.96.0.10", "fd00::10") }),
		),
	}, {
		name: "node port",
		svc: makeService("svc", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) { sp.NodePort = 30080 })),
	}, {
		name: "load balancer: ingress IPs except ipMode Proxy and hostnames; source ranges",
		svc: makeService("svc", lbService, func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.7/24", "not-a-cidr"}
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) {
			sp.NodePort = 30080
			sp.LoadBalancerIPs = addrs("192.0.2.1", "192.0.2.2")
			sp.LoadBalancerSourceRanges = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
		})),
		wantInvalid: []string{"Service/source-range"},
	}, {
		name: "load balancer status ignored on a ClusterIP service",
		svc: makeService("svc", func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80)),
	}, {
		name: "external IPs: invalid ones dropped one by one",
		svc: makeService("svc", func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{"198.51.100.1", "bogus", "198.51.100.2", "fe80::1%eth0"}
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) {
			sp.ExternalIPs = addrs("198.51.100.1", "198.51.100.2")
		})),
		wantInvalid: []string{"Service/external-ip", "Service/external-ip"},
	}})
}

func TestServicePortsFromServicePolicies(t *testing.T) {
	runConvertCases(t, []convertCase{{
		name: "session affinity ClientIP, default timeout",
		svc:  makeService("svc", func(s *v1.Service) { s.Spec.SessionAffinity = v1.ServiceAffinityClientIP }),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) { sp.AffinityTimeoutSeconds = 10800 })),
	}, {
		name: "session affinity ClientIP, explicit timeout",
		svc: makeService("svc", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) { sp.AffinityTimeoutSeconds = 60 })),
	}, {
		name: "affinity config without ClientIP affinity is ignored",
		svc: makeService("svc", func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityNone
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80)),
	}, {
		name: "eTP Local with health check node port, iTP Local, traffic distribution",
		svc: makeService("svc", lbService, func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = nil
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 32000
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			s.Spec.TrafficDistribution = ptr.To(v1.ServiceTrafficDistributionPreferClose)
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) {
			sp.NodePort = 30080
			sp.ExternalPolicyLocal = true
			sp.InternalPolicyLocal = true
			sp.HealthCheckNodePort = 32000
			sp.TrafficDistribution = v1.ServiceTrafficDistributionPreferClose
		})),
	}, {
		name: "health check node port ignored under eTP Cluster",
		svc: makeService("svc", lbService, func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = nil
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
			s.Spec.HealthCheckNodePort = 32000
		}),
		want: portsByName(wantPort("http", v1.ProtocolTCP, 80, func(sp *ServicePort) { sp.NodePort = 30080 })),
	}})
}

// TestServicePortsFromServiceSkipped covers what is not programmed. Services
// that kube-proxy ignores by design (ExternalName, headless, no cluster IP)
// are skipped silently: they are valid, so they must not count as invalid.
// Malformed ones and malformed ports are reported through the InvalidFunc.
func TestServicePortsFromServiceSkipped(t *testing.T) {
	tests := []struct {
		name        string
		svc         *v1.Service
		wantPorts   []string // port names kept
		wantInvalid []string
	}{
		{name: "nil", svc: nil},
		{name: "ExternalName", svc: makeService("svc", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
		})},
		{name: "headless", svc: makeService("svc", withClusterIPs(v1.ClusterIPNone))},
		{name: "empty cluster IP", svc: makeService("svc", func(s *v1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		})},
		{name: "invalid cluster IP", svc: makeService("svc", withClusterIPs("10.96.0.300")),
			wantInvalid: []string{"Service/cluster-ip"}},
		{name: "invalid second cluster IP", svc: makeService("svc", withClusterIPs("10.96.0.10", "nope")),
			wantInvalid: []string{"Service/cluster-ip"}},
		{name: "port 0 and 70000 skipped, others kept",
			svc:         makeService("svc", withPorts(tcpPort("zero", 0), tcpPort("big", 70000), tcpPort("ok", 81))),
			wantPorts:   []string{"ok"},
			wantInvalid: []string{"Service/port", "Service/port"}},
		{name: "node port out of range",
			svc:         makeService("svc", withPorts(v1.ServicePort{Name: "np", Port: 80, NodePort: 70000, Protocol: v1.ProtocolTCP})),
			wantInvalid: []string{"Service/port"}},
		{name: "unknown protocol",
			svc:         makeService("svc", withPorts(v1.ServicePort{Name: "icmp", Port: 1, Protocol: "ICMP"}, tcpPort("ok", 81))),
			wantPorts:   []string{"ok"},
			wantInvalid: []string{"Service/port"}},
		{name: "duplicate port names",
			svc:         makeService("svc", withPorts(tcpPort("http", 80), tcpPort("http", 8080))),
			wantPorts:   []string{"http"},
			wantInvalid: []string{"Service/duplicate-port"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &invalidRecorder{}
			got := ServicePortsFromService(tc.svc, rec.fn)
			var names []string
			for n, sp := range got {
				names = append(names, n.Port)
				if tc.name == "duplicate port names" && sp.Port != 80 {
					t.Errorf("duplicate: kept port %d, want the first one (80)", sp.Port)
				}
			}
			if d := cmp.Diff(tc.wantPorts, names); d != "" {
				t.Errorf("kept ports (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantInvalid, rec.got()); d != "" {
				t.Errorf("invalid calls (-want +got):\n%s", d)
			}
		})
	}
}

func TestServicePortHelpers(t *testing.T) {
	tests := []struct {
		name                     string
		sp                       ServicePort
		external, cluster, local bool
	}{
		{name: "cluster IP only", sp: ServicePort{}, cluster: true},
		{name: "iTP Local only", sp: ServicePort{InternalPolicyLocal: true}, local: true},
		{name: "node port eTP Local", sp: ServicePort{NodePort: 30000, ExternalPolicyLocal: true}, external: true, cluster: true, local: true},
		// Externally accessible ports always need Cluster endpoints: in-cluster
		// clients of an external address are short-circuited to any endpoint.
		{name: "node port eTP Local iTP Local", sp: ServicePort{NodePort: 30000, ExternalPolicyLocal: true, InternalPolicyLocal: true}, external: true, cluster: true, local: true},
		{name: "external IP, iTP Local", sp: ServicePort{ExternalIPs: addrs("192.0.2.1"), InternalPolicyLocal: true}, external: true, cluster: true, local: true},
		{name: "eTP Local without external access", sp: ServicePort{ExternalPolicyLocal: true}, cluster: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sp.ExternallyAccessible(); got != tc.external {
				t.Errorf("ExternallyAccessible = %v, want %v", got, tc.external)
			}
			if got := tc.sp.UsesClusterEndpoints(); got != tc.cluster {
				t.Errorf("UsesClusterEndpoints = %v, want %v", got, tc.cluster)
			}
			if got := tc.sp.UsesLocalEndpoints(); got != tc.local {
				t.Errorf("UsesLocalEndpoints = %v, want %v", got, tc.local)
			}
		})
	}
}
