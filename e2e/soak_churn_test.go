//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// soakChurn changes the API's objects continuously, one goroutine per
// kind of change, all through the API: endpoint updates of background
// Services (one endpoint replaced by a new address: the counts stay),
// a Service created and the oldest deleted, a Service's slice split in two
// and merged back, the nodes' labels, and the probe Service's extra
// endpoints. The background Services are "bg-%05d" of the first proxy's
// namespace; created ones continue the numbering.
type soakChurn struct {
	cs       kubernetes.Interface
	env      *framework.Env // where the Services are
	nodes    []string
	eps      int
	probeSvc *corev1.Service
	stable   []framework.Pod // the probe Service's stable endpoints
	extra    []framework.Pod // its churned ones

	mu     sync.Mutex
	live   []string // Services the churn may touch, oldest first
	busy   map[string]bool
	cached map[string]*discoveryv1.EndpointSlice // a Service's "-1" slice as last written
	split  string                                // the Service whose slice is split, "" when none
	next   int                                   // index of the next created Service
	addr   int                                   // counter of new endpoint addresses
	counts map[string]int                        // done, by kind
	errs   map[string]int                        // failed, by kind
	first  map[string]error                      // first failure, by kind
	missed int                                   // update ticks dropped: every updater busy
}

func newSoakChurn(t *testing.T, cfg soakConfig, proxies []*soakProxy) *soakChurn {
	t.Helper()
	env := proxies[0].env
	pods := env.Topo.Pods
	c := &soakChurn{
		cs: burstClient(t), env: env, eps: cfg.endpoints, stable: pods[1:3], extra: pods[3:5],
		busy: map[string]bool{}, cached: map[string]*discoveryv1.EndpointSlice{}, next: cfg.services,
		counts: map[string]int{}, errs: map[string]int{}, first: map[string]error{},
	}
	for _, p := range proxies {
		c.nodes = append(c.nodes, p.env.Topo.NodeName)
	}
	for i := range cfg.services {
		c.live = append(c.live, fmt.Sprintf("bg-%05d", i))
	}
	svc := framework.NewService(env.Namespace, "soak-probe", framework.NewServicePort("tcp", corev1.ProtocolTCP, 80, framework.EchoPort))
	c.probeSvc = env.CreateService(t, svc)
	env.CreatePodSlices(t, c.probeSvc, "1", echoPorts()[:1], c.stable...)
	return c
}

// start runs every kind of churn until the returned stop is called.
func (c *soakChurn) start(begin time.Time) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(fn func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); fn(ctx) }()
	}
	ticks := make(chan struct{}, soakUpdaters)
	run(func(ctx context.Context) {
		every(ctx, soakUpdateEvery, 0, func() {
			select {
			case ticks <- struct{}{}:
			default:
				c.mu.Lock()
				c.missed++
				c.mu.Unlock()
			}
		})
	})
	for range soakUpdaters {
		run(func(ctx context.Context) {
			for {
				select {
				case <-ctx.Done():
					return
				case <-ticks:
					c.do("update", func() error { return c.updateEndpoint(ctx) })
				}
			}
		})
	}
	run(func(ctx context.Context) {
		every(ctx, soakCreateEvery, soakCreateEvery, func() { c.do("create+delete", func() error { return c.createDelete(ctx) }) })
	})
	run(func(ctx context.Context) {
		every(ctx, soakSplitEvery, soakSplitEvery, func() { c.do("split/merge", func() error { return c.splitMerge(ctx) }) })
	})
	run(func(ctx context.Context) {
		every(ctx, soakNodeEvery, soakNodeFirst, func() { c.do("node labels", func() error { return c.relabel(ctx) }) })
	})
	run(func(ctx context.Context) {
		every(ctx, soakProbeChurn, soakProbeChurn, func() { c.do("probe endpoints", func() error { return c.probeEndpoints(ctx) }) })
	})
	return func() { cancel(); wg.Wait() }
}

// every calls fn after first, then every period, until ctx ends.
func every(ctx context.Context, period, first time.Duration, fn func()) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(first):
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// do runs one change and counts it; errSkip is neither done nor failed.
func (c *soakChurn) do(kind string, fn func() error) {
	err := fn()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err == errSkip:
	case err != nil && !strings.Contains(err.Error(), "context canceled"):
		c.errs[kind]++
		if c.first[kind] == nil {
			c.first[kind] = err
		}
	case err == nil:
		c.counts[kind]++
	}
}

var errSkip = fmt.Errorf("nothing to change")

// take marks a random idle Service busy and returns it.
func (c *soakChurn) take() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for range 8 {
		name := c.live[rand.IntN(len(c.live))]
		if !c.busy[name] {
			c.busy[name] = true
			return name, true
		}
	}
	return "", false
}

func (c *soakChurn) release(name string) {
	c.mu.Lock()
	delete(c.busy, name)
	c.mu.Unlock()
}

// slice returns Service name's "-1" slice, from the cache or the API.
func (c *soakChurn) slice(ctx context.Context, name string) (*discoveryv1.EndpointSlice, error) {
	c.mu.Lock()
	s := c.cached[name]
	c.mu.Unlock()
	if s != nil {
		return s.DeepCopy(), nil
	}
	return c.cs.DiscoveryV1().EndpointSlices(c.env.Namespace).Get(ctx, name+"-1", metav1.GetOptions{})
}

// write updates slice s and caches what the API returned.
func (c *soakChurn) write(ctx context.Context, name string, s *discoveryv1.EndpointSlice) error {
	framework.SetTriggerTime(s, time.Now())
	got, err := c.cs.DiscoveryV1().EndpointSlices(c.env.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		delete(c.cached, name) // read it again next time
		return err
	}
	c.cached[name] = got
	return nil
}

// newAddr is an endpoint address no other endpoint has: 10.251.0.1 on,
// through 10.254.249.250 (250k addresses).
func (c *soakChurn) newAddr() string {
	c.mu.Lock()
	k := c.addr
	c.addr++
	c.mu.Unlock()
	return fmt.Sprintf("10.%d.%d.%d", 251+(k/62500)%4, (k/250)%250, k%250+1)
}

// updateEndpoint replaces one endpoint of a random Service's slice by a
// new address.
func (c *soakChurn) updateEndpoint(ctx context.Context) error {
	name, ok := c.take()
	if !ok {
		return errSkip
	}
	defer c.release(name)
	s, err := c.slice(ctx, name)
	if err != nil {
		return err
	}
	if len(s.Endpoints) == 0 {
		return errSkip
	}
	s.Endpoints[rand.IntN(len(s.Endpoints))].Addresses = []string{c.newAddr()}
	return c.write(ctx, name, s)
}

// createDelete creates the next Service with its slice, then deletes the
// oldest idle one (with its slices).
func (c *soakChurn) createDelete(ctx context.Context) error {
	c.mu.Lock()
	i := c.next
	c.next++
	c.mu.Unlock()
	if err := createBackgroundService(ctx, c.cs, c.env, i, c.eps, 1); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	c.mu.Lock()
	c.live = append(c.live, fmt.Sprintf("bg-%05d", i))
	victim := ""
	for j, name := range c.live {
		if !c.busy[name] {
			victim = name
			c.live = append(c.live[:j:j], c.live[j+1:]...)
			delete(c.cached, name)
			break
		}
	}
	c.mu.Unlock()
	if victim == "" {
		return nil
	}
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + victim}
	if err := c.cs.DiscoveryV1().EndpointSlices(c.env.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return fmt.Errorf("delete %s's slices: %w", victim, err)
	}
	if err := c.cs.CoreV1().Services(c.env.Namespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w", victim, err)
	}
	return nil
}

// splitMerge merges the split Service's two slices back into its "-1"
// (deleting "-2"), or, when none is split, splits a random Service's
// slice: "-2" is created with the second half of its endpoints, then
// "-1" keeps the first half. Either way the endpoints stay the same (for
// a moment some are in both slices). The split Service stays busy until
// it is merged.
func (c *soakChurn) splitMerge(ctx context.Context) error {
	c.mu.Lock()
	name := c.split
	c.mu.Unlock()
	if name != "" {
		return c.merge(ctx, name)
	}
	name, ok := c.take()
	if !ok {
		return errSkip
	}
	s, err := c.slice(ctx, name)
	if err != nil {
		c.release(name)
		return err
	}
	half := len(s.Endpoints) / 2
	second := framework.NewEndpointSlice(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.env.Namespace, Name: name}}, "2", s.Ports, s.Endpoints[half:]...)
	if _, err := c.cs.DiscoveryV1().EndpointSlices(c.env.Namespace).Create(ctx, second, metav1.CreateOptions{}); err != nil {
		c.release(name)
		return fmt.Errorf("split %s: %w", name, err)
	}
	c.mu.Lock()
	c.split = name // busy until merged
	c.mu.Unlock()
	s.Endpoints = s.Endpoints[:half]
	return c.write(ctx, name, s)
}

func (c *soakChurn) merge(ctx context.Context, name string) error {
	slices := c.cs.DiscoveryV1().EndpointSlices(c.env.Namespace)
	second, err := slices.Get(ctx, name+"-2", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("merge %s: %w", name, err)
	}
	s, err := c.slice(ctx, name)
	if err != nil {
		return err
	}
	s.Endpoints = append(s.Endpoints, second.Endpoints...)
	if err := c.write(ctx, name, s); err != nil {
		return fmt.Errorf("merge %s: %w", name, err)
	}
	if err := slices.Delete(ctx, name+"-2", metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("merge %s: %w", name, err)
	}
	c.mu.Lock()
	c.split = ""
	c.mu.Unlock()
	c.release(name)
	return nil
}

// relabel changes a label of every proxy's Node: its zone and a
// generation counter.
func (c *soakChurn) relabel(ctx context.Context) error {
	c.mu.Lock()
	gen := c.counts["node labels"] + 1
	c.mu.Unlock()
	for _, name := range c.nodes {
		node, err := c.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Labels[corev1.LabelTopologyZone] = fmt.Sprintf("zone-%d", gen%2)
		node.Labels["soak.switchyard.io/generation"] = fmt.Sprint(gen)
		if _, err := c.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// probeEndpoints steps the probe Service's churned endpoints through
// none, pod3, pod3+pod4, pod4; its stable endpoints stay.
func (c *soakChurn) probeEndpoints(ctx context.Context) error {
	c.mu.Lock()
	step := c.counts["probe endpoints"] % 4
	c.mu.Unlock()
	pods := append([]framework.Pod(nil), c.stable...)
	switch step {
	case 0:
		pods = append(pods, c.extra[0])
	case 1:
		pods = append(pods, c.extra...)
	case 2:
		pods = append(pods, c.extra[1])
	}
	s, err := c.slice(ctx, c.probeSvc.Name)
	if err != nil {
		return err
	}
	s.Endpoints = framework.PodEndpoints(c.env.Topo.NodeName, pods...)
	return c.write(ctx, c.probeSvc.Name, s)
}

// summary is one line per kind: done, failed, the first failure.
func (c *soakChurn) summary(elapsed time.Duration) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var kinds []string
	for k := range c.counts {
		kinds = append(kinds, k)
	}
	for k := range c.errs {
		if c.counts[k] == 0 {
			kinds = append(kinds, k)
		}
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "churn %s: %d done (%.2f/s), %d failed", k, c.counts[k], float64(c.counts[k])/elapsed.Seconds(), c.errs[k])
		if c.first[k] != nil {
			fmt.Fprintf(&b, " (first: %v)", c.first[k])
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "churn update ticks missed (all %d updaters busy): %d\n", soakUpdaters, c.missed)
	return b.String()
}
