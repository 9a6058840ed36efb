package kubeapi

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Resource is one kind of object switchyard reads.
type Resource int

const (
	Services Resource = iota
	EndpointSlices
	Nodes
)

// String is the resource's name as RBAC and the API know it.
func (r Resource) String() string {
	switch r {
	case Services:
		return "services"
	case EndpointSlices:
		return "endpointslices.discovery.k8s.io"
	case Nodes:
		return "nodes"
	}
	return fmt.Sprintf("resource(%d)", int(r))
}

// Client is what switchyard asks of the API server.
type Client interface {
	// ListerWatcher lists and watches r in every namespace, with tweak
	// applied to each request's options (label and field selectors).
	ListerWatcher(r Resource, tweak func(*metav1.ListOptions)) cache.ListerWatcher
	// Node reads one Node.
	Node(ctx context.Context, name string) (*v1.Node, error)
}

// EventSink records Events (events.k8s.io/v1), as kube-proxy records
// "Starting" on its Node. The daemon's Client is one; a Client that is
// not has no Events recorded.
type EventSink interface {
	CreateEvent(ctx context.Context, ev *eventsv1.Event) error
}

// restClient is Client over client-go's REST client.
type restClient struct {
	core, discovery, events rest.Interface
	params                  runtime.ParameterCodec
}

// New returns a Client for cfg (its content type, QPS, burst and user
// agent are used as they are). The two API groups share one HTTP client.
func New(cfg *rest.Config) (Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, discovery.AddToScheme, eventsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("kubeapi: scheme: %w", err)
		}
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeapi: HTTP client: %w", err)
	}
	group := func(gv schema.GroupVersion, path string) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath, c.NegotiatedSerializer = &gv, path, codecs
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		return rest.RESTClientForConfigAndClient(c, httpClient)
	}
	core, err := group(v1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, fmt.Errorf("kubeapi: core/v1 client: %w", err)
	}
	disc, err := group(discovery.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, fmt.Errorf("kubeapi: discovery/v1 client: %w", err)
	}
	events, err := group(eventsv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, fmt.Errorf("kubeapi: events/v1 client: %w", err)
	}
	return &restClient{core: core, discovery: disc, events: events, params: runtime.NewParameterCodec(scheme)}, nil
}

func (c *restClient) ListerWatcher(r Resource, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	rc, resource, newList := c.core, "services", func() runtime.Object { return &v1.ServiceList{} }
	switch r {
	case EndpointSlices:
		rc, resource, newList = c.discovery, "endpointslices", func() runtime.Object { return &discovery.EndpointSliceList{} }
	case Nodes:
		resource, newList = "nodes", func() runtime.Object { return &v1.NodeList{} }
	}
	req := func(opts *metav1.ListOptions) *rest.Request {
		if tweak != nil {
			tweak(opts)
		}
		rq := rc.Get().Resource(resource).VersionedParams(opts, c.params)
		if opts.TimeoutSeconds != nil {
			rq = rq.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
		}
		return rq
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			out := newList()
			return out, req(&opts).Do(ctx).Into(out)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return req(&opts).Watch(ctx)
		},
	}, rc)
}

func (c *restClient) Node(ctx context.Context, name string) (*v1.Node, error) {
	node := &v1.Node{}
	return node, c.core.Get().Resource("nodes").Name(name).Do(ctx).Into(node)
}

// CreateEvent implements EventSink.
func (c *restClient) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	return c.events.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Error()
}

// Requests lists every request a Client makes, as "group/resource:verb"
// (the core group is ""): what switchyard's ClusterRole grants.
func Requests() []string {
	return []string{
		"/services:list", "/services:watch",
		"discovery.k8s.io/endpointslices:list", "discovery.k8s.io/endpointslices:watch",
		"/nodes:list", "/nodes:watch", "/nodes:get",
		"events.k8s.io/events:create",
	}
}
