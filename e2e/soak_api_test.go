//go:build e2e

package e2e

import (
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// soakAPI is what the API holds, from informers over every namespace's
// Services and EndpointSlices (a watch, not a list per check).
type soakAPI struct {
	svcs   corelisters.ServiceLister
	slices discoverylisters.EndpointSliceLister
}

func newSoakAPI(t *testing.T) *soakAPI {
	t.Helper()
	cfg := *suite.Cluster.Config
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	a := &soakAPI{svcs: f.Core().V1().Services().Lister(), slices: f.Discovery().V1().EndpointSlices().Lister()}
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	for typ, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			t.Fatalf("informer of %v never synced", typ)
		}
	}
	return a
}

// expected counts what a proxy should hold for the API's objects now
// (framework.KernelCounts): every IPv4 ClusterIP service port with at
// least one ready endpoint, and its distinct ready endpoints (address and
// port), gathered over the Service's IPv4 slices by port name and
// protocol.
func (a *soakAPI) expected() (framework.KernelCounts, error) {
	slices, err := a.slices.List(labels.Everything())
	if err != nil {
		return framework.KernelCounts{}, err
	}
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range slices {
		if name := s.Labels[discoveryv1.LabelServiceName]; name != "" && s.AddressType == discoveryv1.AddressTypeIPv4 {
			bySvc[s.Namespace+"/"+name] = append(bySvc[s.Namespace+"/"+name], s)
		}
	}
	svcs, err := a.svcs.List(labels.Everything())
	if err != nil {
		return framework.KernelCounts{}, err
	}
	var c framework.KernelCounts
	for _, svc := range svcs {
		ip := net.ParseIP(svc.Spec.ClusterIP)
		if svc.Spec.Type == corev1.ServiceTypeExternalName || ip == nil || ip.To4() == nil {
			continue
		}
		if _, ok := svc.Labels["service.kubernetes.io/service-proxy-name"]; ok {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if n := readyEndpoints(bySvc[svc.Namespace+"/"+svc.Name], sp); n > 0 {
				c.Services++
				c.Endpoints += n
			}
		}
	}
	return c, nil
}

// readyEndpoints counts the distinct ready endpoints of service port sp
// over slices.
func readyEndpoints(slices []*discoveryv1.EndpointSlice, sp corev1.ServicePort) int {
	seen := map[string]bool{}
	for _, s := range slices {
		for _, p := range s.Ports {
			proto := corev1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if p.Port == nil || proto != sp.Protocol || (p.Name == nil) != (sp.Name == "") || p.Name != nil && *p.Name != sp.Name {
				continue
			}
			for _, ep := range s.Endpoints {
				if len(ep.Addresses) == 0 || ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				seen[net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(*p.Port)))] = true
			}
		}
	}
	return len(seen)
}

// soakCheck compares the kernel of p's node with the API until they agree
// (the API read before and after the kernel, so a change between the two
// reads does not count against the proxy) or bound has passed, after two
// reads at least: the lag it took, or the last counts that disagreed.
type soakCheck struct {
	kernel, api framework.KernelCounts
	lag         time.Duration
	ok          bool
	err         error
}

func (a *soakAPI) check(p *soakProxy, bound time.Duration) soakCheck {
	start := time.Now()
	var c soakCheck
	for attempt := 0; ; attempt++ {
		before, err1 := a.expected()
		k, err2 := framework.ReadKernelCounts(p.env.Topo.NodeNS, p.layout)
		after, err3 := a.expected()
		c = soakCheck{kernel: k, api: after}
		if attempt > 0 {
			c.lag = time.Since(start)
		}
		switch {
		case err1 != nil || err2 != nil || err3 != nil:
			c.err = firstErr(err1, err2, err3) // retried: only the last attempt's error stays
		case k == before:
			c.api, c.ok = before, true
		case k == after:
			c.ok = true
		}
		// A read that outlasted the bound (a starved machine: one took
		// 2.4 min at a load average of 80) says nothing of the
		// proxy's lag: read once more before counting a mismatch.
		if c.ok || time.Since(start) > bound && attempt > 0 {
			return c
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
