package proxier

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
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
	factory := informers.NewSharedInformerFactoryWithOptions(p.client, informerResync,
		informers.WithTweakListOptions(tweak), informers.WithTransform(p.informerTransform))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(p.client, informerResync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.cfg.NodeName).String()
		}),
		informers.WithTransform(trimObject))
	access := newAccessReporter(p.cfg.Clock)
	synced, err := p.addHandlers(factory, nodeFactory, tweak, access)
	if err != nil {
		return err
	}
	// Until the first sync the node's rules are unknown: count the start
	// as a queued update, so /healthz fails if that sync does not come
	// within the health timeout (e.g. the API denies the initial list).
	if p.health != nil {
		p.health.QueuedUpdate()
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer nodeFactory.Shutdown()
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

func (p *Proxier) addHandlers(factory, nodeFactory informers.SharedInformerFactory, tweak func(*metav1.ListOptions), access *accessReporter) ([]namedSync, error) {
	// The Service and EndpointSlice informers keep no index: the proxier
	// never looks objects up by namespace, and the factory's default
	// namespace index keeps a set per namespace that stays sized for the
	// most objects the namespace ever held.
	handlers := []struct {
		resource string
		inf      cache.SharedIndexInformer
		h        cache.ResourceEventHandler
	}{
		{"services", factory.InformerFor(&v1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredServiceInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, tweak)
		}), p.serviceHandler()},
		{"endpointslices.discovery.k8s.io", factory.InformerFor(&discovery.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return discoveryinformers.NewFilteredEndpointSliceInformer(c, metav1.NamespaceAll, resync, cache.Indexers{}, tweak)
		}), p.sliceHandler()},
		{"nodes", nodeFactory.Core().V1().Nodes().Informer(), p.nodeHandler()},
	}
	synced := make([]namedSync, 0, len(handlers))
	for _, x := range handlers {
		if err := x.inf.SetWatchErrorHandlerWithContext(access.handler(x.resource)); err != nil {
			return nil, fmt.Errorf("setting the %s watch error handler: %w", x.resource, err)
		}
		reg, err := x.inf.AddEventHandler(x.h)
		if err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		synced = append(synced, namedSync{resource: x.resource, synced: reg.HasSynced})
	}
	return synced, nil
}
