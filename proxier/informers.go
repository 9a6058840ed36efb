package proxier

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
)

const (
	// LabelServiceProxyName marks Services handled by another proxy.
	LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"
	// LabelHeadless marks EndpointSlices of headless Services.
	LabelHeadless = v1.IsHeadlessService
	// informerResync matches kube-proxy's default configSyncPeriod.
	informerResync = 15 * time.Minute
)

// ServiceSelector returns the label selector kube-proxy uses: services and
// slices that are not headless and belong to no other proxy, or, when
// proxyName is set, those that name this proxy.
func ServiceSelector(proxyName string) labels.Selector {
	noHeadless, _ := labels.NewRequirement(LabelHeadless, selection.DoesNotExist, nil)
	var byName *labels.Requirement
	if proxyName == "" {
		byName, _ = labels.NewRequirement(LabelServiceProxyName, selection.DoesNotExist, nil)
	} else {
		r, err := labels.NewRequirement(LabelServiceProxyName, selection.Equals, []string{proxyName})
		if err != nil {
			// Validated by the command line; keep the safe default.
			klog.ErrorS(err, "Invalid service proxy name", "name", proxyName)
			r, _ = labels.NewRequirement(LabelServiceProxyName, selection.DoesNotExist, nil)
		}
		byName = r
	}
	return labels.NewSelector().Add(*noHeadless, *byName)
}

// Run starts the informers, waits for their caches, then runs the sync
// loop until ctx is done. Informers stop with ctx; the dataplane is left
// as it is so a restart drops no traffic.
func (p *Proxier) Run(ctx context.Context) error {
	sel := ServiceSelector(p.cfg.ServiceProxyName).String()
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = sel }
	access := newAccessReporter(p.cfg.Clock)
	infs, synced, err := p.addHandlers(tweak, access)
	if err != nil {
		return err
	}
	// Until the first sync the node's rules are unknown: count the start
	// as a queued update, so /healthz fails if that sync does not come
	// within the health timeout (e.g. the API denies the initial list).
	if p.health != nil {
		p.health.QueuedUpdate()
	}
	infCtx, stop := context.WithCancel(ctx)
	var running sync.WaitGroup
	for _, inf := range infs {
		running.Go(func() { inf.RunWithContext(infCtx) })
	}
	defer running.Wait()
	defer stop()
	// Wait until our handlers have seen every initial object (not only
	// until the informers' caches are full: handlers run asynchronously),
	// and the node too, so the first full sync is complete and knows the
	// node's zone. A partial first sync would drop traffic on restart.
	if !waitForCaches(ctx, access, synced) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	klog.InfoS("Informer caches synced; starting sync loop", "backend", p.backend.Name(), "node", p.cfg.NodeName)
	p.runner.Loop(ctx)
	return nil
}

// informerTransform is the transform of the Service and EndpointSlice
// informers: what it returns is what their caches hold and what the
// event handlers get, the compact forms of Snapshotter.compact.
func (p *Proxier) informerTransform(obj any) (any, error) {
	return p.snap.compact(obj)
}

// addHandlers makes the three informers (Services and EndpointSlices
// through tweak's selector, this node by name) with their handlers. The
// Service and EndpointSlice informers keep no index: the proxier never
// looks objects up by namespace, and a namespace index keeps a set per
// namespace that stays sized for the most objects the namespace ever
// held. Their caches hold the compact forms (informerTransform), the
// node's a trimmed Node.
func (p *Proxier) addHandlers(tweak func(*metav1.ListOptions), access *accessReporter) ([]cache.SharedIndexInformer, []namedSync, error) {
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.cfg.NodeName).String()
	}
	handlers := []struct {
		resource  kubeapi.Resource
		obj       runtime.Object
		tweak     func(*metav1.ListOptions)
		transform cache.TransformFunc
		h         cache.ResourceEventHandler
	}{
		{kubeapi.Services, &v1.Service{}, tweak, p.informerTransform, p.serviceHandler()},
		{kubeapi.EndpointSlices, &discovery.EndpointSlice{}, tweak, p.informerTransform, p.sliceHandler()},
		{kubeapi.Nodes, &v1.Node{}, byName, trimObject, p.nodeHandler()},
	}
	infs := make([]cache.SharedIndexInformer, 0, len(handlers))
	synced := make([]namedSync, 0, len(handlers))
	for _, x := range handlers {
		inf := cache.NewSharedIndexInformerWithOptions(p.client.ListerWatcher(x.resource, x.tweak), x.obj,
			cache.SharedIndexInformerOptions{ResyncPeriod: informerResync, Indexers: cache.Indexers{}})
		if err := inf.SetTransform(x.transform); err != nil {
			return nil, nil, fmt.Errorf("setting the %s transform: %w", x.resource, err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(access.handler(x.resource.String())); err != nil {
			return nil, nil, fmt.Errorf("setting the %s watch error handler: %w", x.resource, err)
		}
		reg, err := inf.AddEventHandler(x.h)
		if err != nil {
			return nil, nil, fmt.Errorf("adding event handler: %w", err)
		}
		infs = append(infs, inf)
		synced = append(synced, namedSync{resource: x.resource.String(), synced: reg.HasSynced})
	}
	return infs, synced, nil
}
