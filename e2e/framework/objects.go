package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by value of every
// EndpointSlice the tests write (there is no controller-manager).
const ManagedBy = "e2e.switchyard.io"

// TriggerTimeAnnotation is what network_programming_duration_seconds is
// measured from; the endpointslice controller would normally set it.
const TriggerTimeAnnotation = "endpoints.kubernetes.io/last-change-trigger-time"

// NewService returns a selector-less ClusterIP Service; the apiserver
// allocates the IP. Adjust Spec fields (Type, policies, ...) before creating.
func NewService(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
	}
}

// NewServicePort is a Service port named name forwarding port to targetPort.
func NewServicePort(name string, proto corev1.Protocol, port, targetPort int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(targetPort)}
}

// NewEndpointSlice returns an EndpointSlice named "<service>-<suffix>" for
// svc, labelled so proxies associate it with svc, and stamped with a
// trigger time of now. Its address type is the family of the first
// endpoint's address (IPv4 when there is none).
func NewEndpointSlice(svc *corev1.Service, suffix string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	addrType := discoveryv1.AddressTypeIPv4
	if len(eps) > 0 && len(eps[0].Addresses) > 0 && FamilyOf(eps[0].Addresses[0]) == corev1.IPv6Protocol {
		addrType = discoveryv1.AddressTypeIPv6
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace,
			Name:      svc.Name + "-" + suffix,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: svc.Name,
				discoveryv1.LabelManagedBy:   ManagedBy,
			},
		},
		AddressType: addrType,
		Endpoints:   eps,
		Ports:       ports,
	}
	SetTriggerTime(s, time.Now())
	return s
}

// SetTriggerTime records when the change a slice carries was triggered.
func SetTriggerTime(s *discoveryv1.EndpointSlice, t time.Time) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[TriggerTimeAnnotation] = t.UTC().Format(time.RFC3339Nano)
}

// NewEndpointPort names an EndpointSlice port (matching a ServicePort name).
func NewEndpointPort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(port)}
}

// ReadyEndpoint is a ready, serving, not terminating endpoint on nodeName.
func ReadyEndpoint(ip, nodeName string) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses: []string{ip},
		NodeName:  ptr.To(nodeName),
		Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false),
		},
	}
}

// PodEndpoints are ready endpoints for pods, all on nodeName.
func PodEndpoints(nodeName string, pods ...Pod) []discoveryv1.Endpoint {
	eps := make([]discoveryv1.Endpoint, len(pods))
	for i, p := range pods {
		eps[i] = ReadyEndpoint(p.IP, nodeName)
		eps[i].TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: p.Name}
	}
	return eps
}

// PodEndpointsOf are ready endpoints on nodeName at the pods' addresses of
// family f.
func PodEndpointsOf(f corev1.IPFamily, nodeName string, pods ...Pod) []discoveryv1.Endpoint {
	eps := PodEndpoints(nodeName, pods...)
	for i, p := range pods {
		eps[i].Addresses = []string{IPOfFamily(p.IPs, f)}
	}
	return eps
}

// CreateNode creates a Node named name whose status carries internalIPs
// (one per family, primary first) and whose spec carries podCIDRs, so a
// proxy started with --hostname-override=name finds its addresses.
func CreateNode(ctx context.Context, cs kubernetes.Interface, name string, internalIPs, podCIDRs []string) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux"},
	}}
	if len(podCIDRs) > 0 {
		node.Spec.PodCIDR, node.Spec.PodCIDRs = podCIDRs[0], podCIDRs
	}
	created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	for _, ip := range internalIPs {
		created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	created.Status.Addresses = append(created.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set addresses of node %s: %w", name, err)
	}
	return nil
}
