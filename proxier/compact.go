package proxier

import (
	"cmp"
	"slices"
	"time"
	"unique"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The Service and EndpointSlice informers keep compact forms, not the API
// objects: their transform (Snapshotter.compact) converts each object once,
// as it arrives, into what the trackers need, and the informer cache, the
// trackers and the State then share those values. A decoded v1.Service or
// EndpointSlice is several times larger than what the proxier reads from
// it (issue 25: at 10k Services × 10 endpoints the informers' objects
// were most of the live heap).

// serviceInfo is the compact form of a v1.Service: its service ports,
// converted and validated (none for ExternalName, headless or invalid
// Services, which are kept so that a later change or deletion is seen).
// The *ServicePort values are shared with the trackers and every State
// and are never modified.
type serviceInfo struct {
	name            types.NamespacedName
	resourceVersion string
	ports           []*ServicePort
}

// sliceInfo is the compact form of a discovery/v1 EndpointSlice.
type sliceInfo struct {
	namespace, name, resourceVersion string
	// service is the kubernetes.io/service-name label, "" when missing;
	// such a slice is not converted any further.
	service string
	ports   []slicePort
	// endpoints are the valid endpoints, sorted by address and unique
	// (the most usable copy of a duplicate kept, see dedupEndpoints).
	// When the slice has exactly one port, their Port is set to it, so
	// that a Service with one such slice uses this very array in the
	// trackers and the State; otherwise Port is 0 and mergeSlices sets it.
	endpoints []Endpoint
	// trigger is the last-change-trigger-time annotation, zero if absent.
	trigger time.Time
}

type slicePort struct {
	name     string
	protocol v1.Protocol
	port     uint16
}

// newServiceInfo converts a Service to its compact form, skipping with a
// log line and a call to invalid what cannot be programmed. A Service of
// a family the node does not program (families) has no ports.
func newServiceInfo(svc *v1.Service, invalid InvalidFunc, families *familyFilter) *serviceInfo {
	info := &serviceInfo{
		name:            types.NamespacedName{Namespace: intern(svc.Namespace), Name: svc.Name},
		resourceVersion: svc.ResourceVersion,
	}
	if families.skipsService(svc) {
		return info
	}
	ports := ServicePortsFromService(svc, invalid)
	if len(ports) > 0 {
		info.ports = make([]*ServicePort, 0, len(ports))
		for _, sp := range ports {
			info.ports = append(info.ports, sp)
		}
		slices.SortFunc(info.ports, func(a, b *ServicePort) int { return compareNames(a.Name, b.Name) })
	}
	return info
}

// newSliceInfo converts an EndpointSlice of the node nodeName (which
// decides Endpoint.IsLocal) to its compact form.
func newSliceInfo(s *discovery.EndpointSlice, nodeName string, topologies *topologyInterner, invalid InvalidFunc, families *familyFilter) *sliceInfo {
	info := &sliceInfo{
		namespace:       intern(s.Namespace),
		name:            s.Name,
		resourceVersion: s.ResourceVersion,
	}
	svc, ok := serviceOfSlice(s)
	if !ok {
		return info // reported by the tracker, as every slice without a Service
	}
	info.service = svc.Name
	info.trigger, _ = triggerTime(s)
	if families.skipsSlice(s) {
		return info // of a family the node does not program: no endpoints
	}
	conv := convertSlice(s, nodeName, topologies, invalid)
	info.ports, info.endpoints = conv.ports, conv.endpoints
	return info
}

// GetObjectMeta lets client-go's key functions and resource-version checks
// (meta.Accessor) read the compact forms in the informer cache.
func (s *serviceInfo) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.name.Namespace, Name: s.name.Name, ResourceVersion: s.resourceVersion}
}

// GetName and GetNamespace make a serviceInfo a klog.KMetadata.
func (s *serviceInfo) GetName() string      { return s.name.Name }
func (s *serviceInfo) GetNamespace() string { return s.name.Namespace }

// GetObjectMeta: see serviceInfo.GetObjectMeta.
func (s *sliceInfo) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, ResourceVersion: s.resourceVersion}
}

// GetName and GetNamespace make a sliceInfo a klog.KMetadata.
func (s *sliceInfo) GetName() string      { return s.name }
func (s *sliceInfo) GetNamespace() string { return s.namespace }

// intern returns the canonical copy of s. Node names, zones, namespaces
// and port names repeat across thousands of objects; decoded from the
// API, each copy is its own allocation. The unique package drops a
// canonical copy once nothing refers to it, so churn (namespaces of CI
// runs, replaced nodes) does not accumulate.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// canonicalProtocol returns the package constant for a valid protocol,
// so that no decoded copy of "TCP" is kept per port.
func canonicalProtocol(p v1.Protocol) v1.Protocol {
	switch p {
	case v1.ProtocolTCP:
		return v1.ProtocolTCP
	case v1.ProtocolUDP:
		return v1.ProtocolUDP
	case v1.ProtocolSCTP:
		return v1.ProtocolSCTP
	}
	return p
}

// compareNames orders service port names by port name, then protocol
// (within one Service, the rest is equal).
func compareNames(a, b ServicePortName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
}
