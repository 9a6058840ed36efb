package proxier

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	kubeclientset "github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

var errBackend = errors.New("backend failed")

type recordedSync struct {
	st    *State // a copy taken during the sync
	given *State // the State the backend was given
	diff  *Diff
	err   error
}

// recordingBackend is a Backend that remembers every State and Diff it is
// given and fails on request.
type recordingBackend struct {
	mu       sync.Mutex
	syncs    []recordedSync
	failures int
	changed  chan struct{}
}

func newRecordingBackend() *recordingBackend {
	return &recordingBackend{changed: make(chan struct{}, 1)}
}

func (b *recordingBackend) Name() string { return "recording" }

func (b *recordingBackend) Sync(_ context.Context, st *State, diff *Diff) (SyncResult, error) {
	b.mu.Lock()
	var err error
	if b.failures > 0 {
		b.failures--
		err = errBackend
	}
	// A State is valid during its sync only (the next snapshot updates its
	// maps): keep a copy.
	kept := &State{Services: maps.Clone(st.Services), Endpoints: maps.Clone(st.Endpoints), Node: st.Node}
	b.syncs = append(b.syncs, recordedSync{st: kept, given: st, diff: diff, err: err})
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return SyncResult{}, err
}

func (b *recordingBackend) Cleanup(context.Context) error { return nil }

func (b *recordingBackend) failNext(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures = n
}

func (b *recordingBackend) all() []recordedSync {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.syncs)
}

// waitFor returns the first sync at index >= from for which ok holds, and
// its index. It fails the test if none comes before the hang guard.
func (b *recordingBackend) waitFor(t *testing.T, from int, what string, ok func(recordedSync) bool) (int, recordedSync) {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		syncs := b.all()
		for i := from; i < len(syncs); i++ {
			if ok(syncs[i]) {
				return i, syncs[i]
			}
		}
		select {
		case <-b.changed:
		case <-deadline:
			t.Fatalf("no sync with %s among %d syncs", what, len(syncs))
		}
	}
}

// recordingHealth is a HealthUpdater and PostSyncHook that counts calls.
type recordingHealth struct {
	mu                        sync.Mutex
	queued, updated, postSync int
	nodes                     []string
	postStates                []*State
}

func (h *recordingHealth) QueuedUpdate() { h.mu.Lock(); h.queued++; h.mu.Unlock() }
func (h *recordingHealth) Updated()      { h.mu.Lock(); h.updated++; h.mu.Unlock() }
func (h *recordingHealth) SyncNode(n *v1.Node) {
	h.mu.Lock()
	h.nodes = append(h.nodes, n.Name)
	h.mu.Unlock()
}
func (h *recordingHealth) PostSync(_ context.Context, st *State, _ *Diff) {
	h.mu.Lock()
	h.postSync++
	h.postStates = append(h.postStates, st)
	h.mu.Unlock()
}

func (h *recordingHealth) states() []*State {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.postStates)
}

func (h *recordingHealth) counts() (queued, updated, postSync int, nodes []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queued, h.updated, h.postSync, slices.Clone(h.nodes)
}

type proxierHarness struct {
	t       *testing.T
	client  *fake.Clientset
	log     *selectorLog
	backend *recordingBackend
	health  *recordingHealth
	metrics *metrics.Metrics
	clock   *clocktesting.FakeClock
	p       *Proxier
}

// startProxier runs a Proxier for node-a over a selector-honouring fake
// clientset holding objs, with the given MinSyncPeriod and no Holdoff. Its clock is fake:
// the periodic resync (1h), retries and MinSyncPeriod waits only end when
// the test steps it.
func startProxier(t *testing.T, minSync time.Duration, objs ...runtime.Object) *proxierHarness {
	client, log := newSelectingClient(objs...)
	h := &proxierHarness{
		t: t, client: client, log: log,
		backend: newRecordingBackend(),
		health:  &recordingHealth{},
		metrics: metrics.New(prometheus.NewRegistry()),
		clock:   clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	cfg := Config{NodeName: "node-a", MinSyncPeriod: minSync, SyncPeriod: time.Hour, Holdoff: -1, Clock: h.clock}
	h.p = New(kubeclientset.New(client), h.backend, cfg, h.metrics, h.health, nil, h.health)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(hangGuard):
			t.Errorf("Run did not return after cancel")
		}
	})
	return h
}

func sliceWithLabels(s *discovery.EndpointSlice, kv ...string) *discovery.EndpointSlice {
	for i := 0; i+1 < len(kv); i += 2 {
		s.Labels[kv[i]] = kv[i+1]
	}
	return s
}

func hasEndpoints(st *State, n ServicePortName, want ...string) bool {
	return cmp.Equal(endpointKeys(st.Endpoints[n]), want)
}

func hasService(st *State, n ServicePortName) bool {
	_, ok := st.Services[n]
	return ok
}

// metricValue is a counter's or gauge's value, or a histogram's sample
// count.
func metricValue(t *testing.T, m any) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.(prometheus.Metric).Write(&out); err != nil {
		t.Fatalf("reading metric: %v", err)
	}
	switch {
	case out.Counter != nil:
		return out.Counter.GetValue()
	case out.Gauge != nil:
		return out.Gauge.GetValue()
	case out.Histogram != nil:
		return float64(out.Histogram.GetSampleCount())
	}
	t.Fatalf("metric is neither counter, gauge nor histogram")
	return 0
}

func (h *proxierHarness) create(obj runtime.Object) {
	h.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *v1.Service:
		_, err = h.client.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *discovery.EndpointSlice:
		_, err = h.client.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		h.t.Fatalf("create: unsupported %T", obj)
	}
	if err != nil {
		h.t.Fatalf("create: %v", err)
	}
}

func (h *proxierHarness) updateSlice(s *discovery.EndpointSlice) {
	h.t.Helper()
	if _, err := h.client.DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		h.t.Fatalf("update slice: %v", err)
	}
}
