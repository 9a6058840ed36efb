package framework

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// IPv6 addresses of the topologies, all in the unique-local range
// (fd00::/8) and all inside the namespaces the tests create. The service
// range is the apiserver's second --service-cluster-ip-range (a /112, the
// smallest prefix the apiserver takes for IPv6 is /108).
const (
	DefaultPodCIDR6     = "fd00:10:244::/64"
	DefaultClusterCIDR6 = "fd00:10:244::/48"
	DefaultExtCIDR6     = "fd00:77::/64"
	DefaultServiceCIDR6 = "fd00:10:96::/112"
)

// Shape is the IP-family shape of a cluster as operators run them:
// IPv4-only, IPv6-only or dual-stack (IPv4 primary). It decides the
// topology's addresses, the daemon's --cluster-cidr, the families of the
// Services an Env creates and the EndpointSlices it writes for them.
type Shape string

// The shapes. The zero Shape is ShapeIPv4, what every test ran before
// shapes existed.
const (
	ShapeIPv4 Shape = "ipv4"
	ShapeIPv6 Shape = "ipv6"
	ShapeDual Shape = "dual"
)

// AllShapes lists every shape in the order tests run them.
var AllShapes = []Shape{ShapeIPv4, ShapeIPv6, ShapeDual}

// ShapesEnv narrows the shapes a test runs (comma or space separated, e.g.
// "ipv4,dual"); see ShapesFromEnv.
const ShapesEnv = "SWITCHYARD_E2E_FAMILIES"

// ParseShape accepts "ipv4", "ipv6" and "dual".
func ParseShape(s string) (Shape, error) {
	for _, sh := range AllShapes {
		if Shape(s) == sh {
			return sh, nil
		}
	}
	return "", fmt.Errorf("unknown IP family shape %q (want ipv4, ipv6 or dual)", s)
}

// ShapesFromEnv returns the shapes named in $SWITCHYARD_E2E_FAMILIES, or def
// when it is unset.
func ShapesFromEnv(def []Shape) ([]Shape, error) {
	v := os.Getenv(ShapesEnv)
	if v == "" {
		return def, nil
	}
	var out []Shape
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' }) {
		sh, err := ParseShape(f)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", ShapesEnv, err)
		}
		out = append(out, sh)
	}
	return out, nil
}

// Families lists the shape's IP families, primary first.
func (s Shape) Families() []corev1.IPFamily {
	switch s {
	case ShapeIPv6:
		return []corev1.IPFamily{corev1.IPv6Protocol}
	case ShapeDual:
		return []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	return []corev1.IPFamily{corev1.IPv4Protocol}
}

// HasIPv6 tells whether the shape has an IPv6 family.
func (s Shape) HasIPv6() bool { return s == ShapeIPv6 || s == ShapeDual }

// ClusterCIDR is the daemon's --cluster-cidr for the shape: one CIDR per
// family, primary first, comma-separated. A dual-stack daemon is always
// given both, so it programs both families whatever else it looks at.
func (s Shape) ClusterCIDR() string {
	var cidrs []string
	for _, f := range s.Families() {
		cidrs = append(cidrs, familyCIDRs(f).cluster)
	}
	return strings.Join(cidrs, ",")
}

// ApplyTo sets svc's ipFamilyPolicy and ipFamilies for the shape:
// SingleStack IPv6, or RequireDualStack with IPv4 and IPv6. IPv4 Services
// and those that already name a policy keep what they have (the
// apiserver's primary family is IPv4), and ExternalName Services have no
// families.
func (s Shape) ApplyTo(svc *corev1.Service) {
	if !s.HasIPv6() || svc.Spec.IPFamilyPolicy != nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return
	}
	policy := corev1.IPFamilyPolicySingleStack
	if s == ShapeDual {
		policy = corev1.IPFamilyPolicyRequireDualStack
	}
	svc.Spec.IPFamilyPolicy = &policy
	svc.Spec.IPFamilies = s.Families()
}

// cidrs is the address plan of one family.
type cidrs struct{ pod, cluster, ext, service string }

func familyCIDRs(f corev1.IPFamily) cidrs {
	if f == corev1.IPv6Protocol {
		return cidrs{DefaultPodCIDR6, DefaultClusterCIDR6, DefaultExtCIDR6, DefaultServiceCIDR6}
	}
	return cidrs{DefaultPodCIDR, DefaultClusterCIDR, DefaultExtCIDR, DefaultServiceCIDR}
}

// DefaultServiceCIDRs is the --service-cluster-ip-range of the control
// plane the suite starts: dual-stack, IPv4 first, so Services that name no
// family stay IPv4 and every shape can create its Services.
var DefaultServiceCIDRs = DefaultServiceCIDR + "," + DefaultServiceCIDR6

// ServiceFamilies lists the families of the apiserver's default ServiceCIDR
// ("kubernetes", from --service-cluster-ip-range), primary first.
func ServiceFamilies(ctx context.Context, cs kubernetes.Interface) ([]corev1.IPFamily, error) {
	sc, err := cs.NetworkingV1().ServiceCIDRs().Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get servicecidr kubernetes: %w", err)
	}
	var fams []corev1.IPFamily
	for _, c := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(c); err == nil {
			fams = append(fams, FamilyOf(p.Addr().String()))
		}
	}
	return fams, nil
}

// FamilyOf is the IP family of an address (IPv4 for anything that does not
// parse as IPv6).
func FamilyOf(ip string) corev1.IPFamily {
	if a, err := netip.ParseAddr(ip); err == nil && a.Is6() && !a.Is4In6() {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// IPOfFamily returns the first of ips that is of family f, or "".
func IPOfFamily(ips []string, f corev1.IPFamily) string {
	for _, ip := range ips {
		if FamilyOf(ip) == f {
			return ip
		}
	}
	return ""
}

// ClusterIPOf returns svc's cluster IP of family f, or "" if it has none.
func ClusterIPOf(svc *corev1.Service, f corev1.IPFamily) string {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	return IPOfFamily(ips, f)
}

// FamilySuffix is "ipv4" or "ipv6", for names that carry a family.
func FamilySuffix(f corev1.IPFamily) string { return strings.ToLower(string(f)) }
