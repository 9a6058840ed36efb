package proxier

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// OnServiceUpdate feeds a Service change (old or cur nil for add/delete)
// to the tracker and queues a sync if something changed.
func (p *Proxier) OnServiceUpdate(old, cur *v1.Service) {
	var o *serviceInfo
	if old != nil { // only its name is read
		o = &serviceInfo{name: types.NamespacedName{Namespace: old.Namespace, Name: old.Name}}
	}
	p.onService(o, p.serviceInfoOf(cur))
}

func (p *Proxier) onService(old, cur *serviceInfo) {
	if p.metrics != nil {
		p.metrics.ServiceChangesTotal.Inc()
	}
	if p.snap.Services.update(old, cur) {
		p.queued(false)
	} else {
		p.updatePendingMetrics()
	}
}

// OnEndpointSliceUpdate feeds a slice change to the tracker.
func (p *Proxier) OnEndpointSliceUpdate(s *discovery.EndpointSlice, removed bool) {
	if info := p.sliceInfoOf(s); info != nil {
		p.onSlice(info, removed)
	}
}

func (p *Proxier) onSlice(s *sliceInfo, removed bool) {
	if p.metrics != nil {
		p.metrics.EndpointChangesTotal.Inc()
	}
	if p.snap.Endpoints.update(s, removed) {
		p.queued(true)
	} else {
		p.updatePendingMetrics()
	}
}

// serviceInfoOf returns the compact form of what a Service informer hands
// out: normally already compact (see Snapshotter.compact); nil for nil
// or anything else.
func (p *Proxier) serviceInfoOf(obj any) *serviceInfo {
	switch s := obj.(type) {
	case *serviceInfo:
		return s
	case *v1.Service:
		if s != nil {
			return p.snap.Services.convert(s)
		}
	}
	return nil
}

// sliceInfoOf is serviceInfoOf for EndpointSlices.
func (p *Proxier) sliceInfoOf(obj any) *sliceInfo {
	switch s := obj.(type) {
	case *sliceInfo:
		return s
	case *discovery.EndpointSlice:
		if s != nil {
			return p.snap.Endpoints.convert(s)
		}
	}
	return nil
}

// OnNodeUpdate records this node's labels and addresses.
func (p *Proxier) OnNodeUpdate(n *v1.Node) {
	if p.health != nil {
		p.health.SyncNode(n)
	}
	if p.snap.UpdateNode(n) {
		p.queued(false)
	}
}

func (p *Proxier) serviceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s := p.serviceInfoOf(obj); s != nil {
				p.onService(nil, s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := p.serviceInfoOf(oldObj), p.serviceInfoOf(newObj)
			if o != nil && n != nil {
				p.onService(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if s := p.serviceInfoOf(deletedObject(obj)); s != nil {
				p.onService(s, nil)
			}
		},
	}
}

func (p *Proxier) sliceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s := p.sliceInfoOf(obj); s != nil {
				p.onSlice(s, false)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if s := p.sliceInfoOf(newObj); s != nil {
				p.onSlice(s, false)
			}
		},
		DeleteFunc: func(obj any) {
			if s := p.sliceInfoOf(deletedObject(obj)); s != nil {
				p.onSlice(s, true)
			}
		},
	}
}

func (p *Proxier) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				p.OnNodeUpdate(n)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if n, ok := newObj.(*v1.Node); ok {
				p.OnNodeUpdate(n)
			}
		},
	}
}

// deletedObject unwraps the tombstone an informer hands out when it missed
// the delete event itself.
func deletedObject(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
