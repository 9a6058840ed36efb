package proxier

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// OnServiceUpdate feeds a Service change (old or cur nil for add/delete)
// to the tracker and queues a sync if something changed.
func (p *Proxier) OnServiceUpdate(old, cur *v1.Service) {
	if p.metrics != nil {
		p.metrics.ServiceChangesTotal.Inc()
	}
	if p.snap.Services.Update(old, cur) {
		p.queued()
	} else {
		p.updatePendingMetrics()
	}
}

// OnEndpointSliceUpdate feeds a slice change to the tracker.
func (p *Proxier) OnEndpointSliceUpdate(s *discovery.EndpointSlice, removed bool) {
	if p.metrics != nil {
		p.metrics.EndpointChangesTotal.Inc()
	}
	if p.snap.Endpoints.Update(s, removed) {
		p.queued()
	} else {
		p.updatePendingMetrics()
	}
}

// OnNodeUpdate records this node's labels and addresses.
func (p *Proxier) OnNodeUpdate(n *v1.Node) {
	if p.health != nil {
		p.health.SyncNode(n)
	}
	if p.snap.UpdateNode(n) {
		p.queued()
	}
}

func (p *Proxier) serviceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*v1.Service); ok {
				p.OnServiceUpdate(nil, s)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*v1.Service)
			n, ok2 := newObj.(*v1.Service)
			if ok1 && ok2 {
				p.OnServiceUpdate(o, n)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := deletedObject(obj).(*v1.Service); ok {
				p.OnServiceUpdate(s, nil)
			}
		},
	}
}

func (p *Proxier) sliceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if s, ok := obj.(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceUpdate(s, false)
			}
		},
		UpdateFunc: func(_, newObj any) {
			if s, ok := newObj.(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceUpdate(s, false)
			}
		},
		DeleteFunc: func(obj any) {
			if s, ok := deletedObject(obj).(*discovery.EndpointSlice); ok {
				p.OnEndpointSliceUpdate(s, true)
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
