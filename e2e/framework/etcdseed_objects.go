package framework

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ipAllocatorName is the manager kube-apiserver's ClusterIP allocator
// stamps on the IPAddresses it creates; its repair loop recreates one
// without it.
const ipAllocatorName = "ipallocator.k8s.io"

// SeedService returns a copy of the ClusterIP Service svc as kube-apiserver
// would store it had it created svc with address ip: a uid, the creation
// time and the spec fields its defaulting and allocation fill, and the
// IPAddress that reserves ip for it. The Service is single-stack, of ip's
// family (IPv4 or IPv6). Other Service types are refused (their node ports
// would need allocating too), and so are a Service that asks for another
// family or for more than one.
func SeedService(svc *corev1.Service, ip netip.Addr, now time.Time) (*corev1.Service, *networkingv1.IPAddress, error) {
	if svc.Spec.Type != "" && svc.Spec.Type != corev1.ServiceTypeClusterIP {
		return nil, nil, fmt.Errorf("service %s: type %s cannot be seeded", svc.Name, svc.Spec.Type)
	}
	fam, err := addrFamily(ip)
	if err != nil {
		return nil, nil, fmt.Errorf("service %s: %w", svc.Name, err)
	}
	if err := seedableFamilies(&svc.Spec, fam); err != nil {
		return nil, nil, fmt.Errorf("service %s: %w", svc.Name, err)
	}
	out := svc.DeepCopy()
	stampCreated(&out.ObjectMeta, now)
	s := &out.Spec
	s.Type = corev1.ServiceTypeClusterIP
	s.ClusterIP, s.ClusterIPs = ip.String(), []string{ip.String()}
	s.IPFamilies, s.IPFamilyPolicy = []corev1.IPFamily{fam}, ptr.To(corev1.IPFamilyPolicySingleStack)
	s.SessionAffinity = orDefault(s.SessionAffinity, corev1.ServiceAffinityNone)
	if s.InternalTrafficPolicy == nil {
		s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		p.Protocol = orDefault(p.Protocol, corev1.ProtocolTCP)
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	return out, seedIPAddress(out, ip, fam), nil
}

// addrFamily is ip's family; an IPv4-mapped IPv6 address (which the API
// refuses as a ClusterIP) and the zero Addr have none.
func addrFamily(ip netip.Addr) (corev1.IPFamily, error) {
	switch {
	case ip.Is4():
		return corev1.IPv4Protocol, nil
	case ip.Is6() && !ip.Is4In6():
		return corev1.IPv6Protocol, nil
	}
	return "", fmt.Errorf("%s is neither an IPv4 nor an IPv6 address", ip)
}

// seedableFamilies refuses a spec that names a family policy other than
// SingleStack or families other than fam alone: a seeded Service has one
// ClusterIP, of fam.
func seedableFamilies(s *corev1.ServiceSpec, fam corev1.IPFamily) error {
	if p := s.IPFamilyPolicy; p != nil && *p != corev1.IPFamilyPolicySingleStack {
		return fmt.Errorf("ipFamilyPolicy %s cannot be seeded (single-stack only)", *p)
	}
	if len(s.IPFamilies) > 1 || len(s.IPFamilies) == 1 && s.IPFamilies[0] != fam {
		return fmt.Errorf("ipFamilies %v cannot be seeded on an %s address", s.IPFamilies, fam)
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// seedIPAddress is the IPAddress the allocator would create for svc on ip
// of family fam.
func seedIPAddress(svc *corev1.Service, ip netip.Addr, fam corev1.IPFamily) *networkingv1.IPAddress {
	a := &networkingv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name: ip.String(),
			Labels: map[string]string{
				networkingv1.LabelIPAddressFamily: string(fam),
				networkingv1.LabelManagedBy:       ipAllocatorName,
			},
		},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{
			Resource: "services", Namespace: svc.Namespace, Name: svc.Name,
		}},
	}
	stampCreated(&a.ObjectMeta, svc.CreationTimestamp.Time)
	return a
}

// SeedEndpointSlice returns a copy of s as kube-apiserver would store it
// after creating it.
func SeedEndpointSlice(s *discoveryv1.EndpointSlice, now time.Time) *discoveryv1.EndpointSlice {
	out := s.DeepCopy()
	stampCreated(&out.ObjectMeta, now)
	out.Generation = 1
	for i := range out.Ports {
		if out.Ports[i].Protocol == nil {
			out.Ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
		}
	}
	return out
}

// stampCreated sets what the apiserver sets on create: a uid and the
// creation time (it stores whole seconds).
func stampCreated(m *metav1.ObjectMeta, now time.Time) {
	m.UID = uuid.NewUUID()
	m.CreationTimestamp = metav1.NewTime(now.Truncate(time.Second))
	m.ResourceVersion = ""
}

// clusterIPBand is the size of the band at the start of a service CIDR that
// kube-apiserver's allocator leaves to Services asking for an address:
// min(max(16, size/16), 256), none below 16 addresses.
func clusterIPBand(size uint64) uint64 {
	if size <= 16 {
		return 0
	}
	return min(max(16, size/16), 256)
}

// SeedClusterIPs returns n addresses of the prefix cidr (IPv4 or IPv6) that
// are not in taken, in order from the end of the band the allocator leaves
// to Services asking for an address, without the network address and, for
// IPv4, the broadcast address (kube-apiserver allocates an IPv6 prefix's
// last address).
func SeedClusterIPs(cidr netip.Prefix, n int, taken map[netip.Addr]bool) ([]netip.Addr, error) {
	cidr = cidr.Masked()
	if !cidr.IsValid() || cidr.Addr().Is4In6() {
		return nil, fmt.Errorf("service CIDR %s is neither IPv4 nor IPv6", cidr)
	}
	last := lastAddr(cidr)
	if cidr.Addr().Is4() {
		last = last.Prev()
	}
	ip := cidr.Addr()
	for range max(1, clusterIPBand(prefixSize(cidr))) {
		ip = ip.Next()
	}
	out := make([]netip.Addr, 0, n)
	for ; ip.IsValid() && !last.Less(ip) && len(out) < n; ip = ip.Next() {
		if !taken[ip] {
			out = append(out, ip)
		}
	}
	if len(out) < n {
		return nil, fmt.Errorf("service CIDR %s has %d free addresses above its static band, want %d", cidr, len(out), n)
	}
	return out, nil
}

// prefixSize is how many addresses p holds, at most 1<<63 (an IPv6 /64 or
// larger: more than any band or seeding needs).
func prefixSize(p netip.Prefix) uint64 {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 63 {
		return 1 << 63
	}
	return 1 << host
}

// lastAddr is p's last address, every host bit set (IPv4's broadcast).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for bit := p.Bits(); bit < len(b)*8; bit++ {
		b[bit/8] |= 0x80 >> (bit % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ServiceCIDR returns the apiserver's default ServiceCIDR ("kubernetes",
// from --service-cluster-ip-range), its prefix of family fam.
func ServiceCIDR(ctx context.Context, cs kubernetes.Interface, fam corev1.IPFamily) (netip.Prefix, error) {
	sc, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("get servicecidr kubernetes: %w", err)
	}
	for _, c := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(c); err == nil && FamilyOf(p.Addr().String()) == fam {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("servicecidr kubernetes has no %s CIDR: %v", fam, sc.Spec.CIDRs)
}

// TakenClusterIPs lists the addresses the apiserver holds: every IPAddress
// and every Service's ClusterIPs (in case one lacks its IPAddress).
func TakenClusterIPs(ctx context.Context, cs kubernetes.Interface) (map[netip.Addr]bool, error) {
	taken := map[netip.Addr]bool{}
	ips, err := cs.NetworkingV1().IPAddresses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ipaddresses: %w", err)
	}
	for _, a := range ips.Items {
		addTaken(taken, a.Name)
	}
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	for _, s := range svcs.Items {
		for _, ip := range s.Spec.ClusterIPs {
			addTaken(taken, ip)
		}
	}
	return taken, nil
}

func addTaken(taken map[netip.Addr]bool, s string) {
	if ip, err := netip.ParseAddr(s); err == nil {
		taken[ip] = true
	}
}
