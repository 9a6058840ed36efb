package proxier

import (
	"maps"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// lastAppliedAnnotation is kubectl's copy of the whole applied object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// compact is the transform of the Service and EndpointSlice informers:
// it converts each object, once, to the compact form the trackers use
// (see compact.go), so their caches hold no API objects. Malformed parts
// are skipped here, with the log line and the invalid-object metric.
// Anything else (a tombstone, already compact) goes through trimObject.
func (s *Snapshotter) compact(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		return s.Services.convert(o), nil
	case *discovery.EndpointSlice:
		return s.Endpoints.convert(o), nil
	case *serviceInfo, *sliceInfo:
		return obj, nil
	}
	return trimObject(obj)
}

// trimObject is the Node informer's transform: before an object enters the
// informer's store it drops what no switchyard code reads and what is
// often most of its size: managedFields, kubectl's last-applied
// annotation and, on a Node, its list of container images. With the
// e2e burst's small objects this took ~11 MiB off the peak RSS at 10k
// Services; objects created by kubectl apply carry a full copy of
// themselves in that annotation.
func trimObject(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone or a foreign object: left as it is
	}
	m.SetManagedFields(nil)
	if a := m.GetAnnotations(); a != nil {
		if _, ok := a[lastAppliedAnnotation]; ok {
			// A copy: the map may be shared with the caller's object.
			a = maps.Clone(a)
			delete(a, lastAppliedAnnotation)
			m.SetAnnotations(a)
		}
	}
	if n, ok := obj.(*v1.Node); ok {
		n.Status.Images = nil
	}
	return obj, nil
}
