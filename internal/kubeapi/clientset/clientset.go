// Package clientset adapts a client-go clientset to kubeapi.Client: for
// tests (client-go's fake clientset) and tools. The daemon does not
// import it (see package kubeapi).
package clientset

import (
	"context"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
)

// Client is a kubeapi.Client over a clientset.
type Client struct{ CS kubernetes.Interface }

// New wraps cs.
func New(cs kubernetes.Interface) *Client { return &Client{CS: cs} }

type listWatch struct {
	list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func (c *Client) funcs(r kubeapi.Resource) listWatch {
	switch r {
	case kubeapi.EndpointSlices:
		s := c.CS.DiscoveryV1().EndpointSlices(metav1.NamespaceAll)
		return listWatch{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) }, s.Watch}
	case kubeapi.Nodes:
		s := c.CS.CoreV1().Nodes()
		return listWatch{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) }, s.Watch}
	}
	s := c.CS.CoreV1().Services(metav1.NamespaceAll)
	return listWatch{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) }, s.Watch}
}

// ListerWatcher implements kubeapi.Client.
func (c *Client) ListerWatcher(r kubeapi.Resource, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	f := c.funcs(r)
	apply := func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
	}
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			apply(&o)
			return f.list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			apply(&o)
			return f.watch(ctx, o)
		},
	}, c.CS)
}

// CreateEvent implements kubeapi.EventSink.
func (c *Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	_, err := c.CS.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

// Node implements kubeapi.Client.
func (c *Client) Node(ctx context.Context, name string) (*v1.Node, error) {
	return c.CS.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}
