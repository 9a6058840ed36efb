package proxier

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestServiceSelector(t *testing.T) {
	tests := []struct {
		name      string
		proxyName string
		want      string
		matches   map[string]bool // labels "k=v,..." -> match
	}{{
		name: "default",
		want: "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name",
		matches: map[string]bool{
			"":                                true,
			"app=web":                         true,
			"service.kubernetes.io/headless=": false,
			"service.kubernetes.io/service-proxy-name=switchyard": false,
			"service.kubernetes.io/service-proxy-name=other":      false,
		},
	}, {
		name:      "named proxy",
		proxyName: "switchyard",
		want:      "!service.kubernetes.io/headless,service.kubernetes.io/service-proxy-name=switchyard",
		matches: map[string]bool{
			"": false,
			"service.kubernetes.io/service-proxy-name=switchyard":                                 true,
			"service.kubernetes.io/service-proxy-name=other":                                      false,
			"service.kubernetes.io/service-proxy-name=switchyard,service.kubernetes.io/headless=": false,
		},
	}, {
		name:      "invalid proxy name falls back to the default",
		proxyName: "not a valid label value!",
		want:      "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel := ServiceSelector(tc.proxyName)
			if got := sel.String(); got != tc.want {
				t.Errorf("selector = %q, want %q", got, tc.want)
			}
			for set, want := range tc.matches {
				ls, err := labels.ConvertSelectorToLabelsMap(set)
				if err != nil {
					t.Fatalf("bad test labels %q: %v", set, err)
				}
				if got := sel.Matches(ls); got != want {
					t.Errorf("Matches(%q) = %v, want %v", set, got, want)
				}
			}
		})
	}
}

// TestProxierInformers drives a Proxier through the fake API server and
// checks what the backend is given, step by step.
func TestProxierInformers(t *testing.T) {
	h := startProxier(t, 0, informerTestObjects()...)
	checkFirstSync(t, h)
	i := checkServiceAdded(t, h)
	i = checkHiddenObjects(t, h, i)
	checkSelectorsRequested(t, h)
	i = checkEndpointRemoved(t, h, i)
	i = checkServiceDeleted(t, h, i)
	checkNodeZoneChange(t, h, i)
}

// informerTestObjects: two nodes, one proxied service and, with their
// slices, one for another proxy and one labelled headless.
func informerTestObjects() []runtime.Object {
	web := makeService("web")
	webSlice := makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1").on("node-a"), ep("10.0.0.2").on("node-b")})
	otherProxy := makeService("other-proxy", withClusterIPs("10.96.0.11"), withLabels(LabelServiceProxyName, "other"))
	otherProxySlice := sliceWithLabels(makeSlice("other-proxy", "other-proxy-1", []sliceEP{ep("10.0.1.1")}), LabelServiceProxyName, "other")
	headless := makeService("headless", withClusterIPs("10.96.0.12"), withLabels(LabelHeadless, ""))
	headlessSlice := sliceWithLabels(makeSlice("headless", "headless-1", []sliceEP{ep("10.0.2.1")}), LabelHeadless, "")
	return []runtime.Object{makeNode("node-a", "z1", "192.168.0.1"), makeNode("node-b", "z9", "192.168.0.2"),
		web, webSlice, otherProxy, otherProxySlice, headless, headlessSlice}
}

func checkFirstSync(t *testing.T, h *proxierHarness) {
	t.Helper()
	// The first sync is full and already complete: every pre-existing
	// object and the node were handled before the sync loop started.
	_, first := h.backend.waitFor(t, 0, "anything", func(recordedSync) bool { return true })
	if !first.diff.Full {
		t.Errorf("first sync not full")
	}
	if d := cmp.Diff([]string{"ns/web:http"}, serviceNames(first.st)); d != "" {
		t.Errorf("first sync services (-want +got):\n%s", d)
	}
	if eps := first.st.Endpoints[httpPort("web")]; len(eps) != 2 || !eps[0].IsLocal || eps[1].IsLocal {
		t.Errorf("first sync endpoints = %+v, want 10.0.0.1 local and 10.0.0.2 remote", eps)
	}
	if first.st.Node.Zone != "z1" || !cmp.Equal(first.st.Node.Addresses, addrs("192.168.0.1"), cmpAddrs) {
		t.Errorf("first sync node = %+v, want node-a in z1", first.st.Node)
	}
}

func checkServiceAdded(t *testing.T, h *proxierHarness) int {
	t.Helper()
	// New service and slice through the API.
	h.create(makeService("api", withClusterIPs("10.96.0.20")))
	h.create(makeSlice("api", "api-1", []sliceEP{ep("10.0.0.3")}))
	i, _ := h.backend.waitFor(t, 1, "api endpoints", func(s recordedSync) bool {
		return hasService(s.st, httpPort("api")) && hasEndpoints(s.st, httpPort("api"), "10.0.0.3:8080")
	})
	for _, s := range h.backend.all()[1 : i+1] {
		if s.diff.Full {
			t.Errorf("sync after a service add is full")
		}
	}
	return i
}

func checkHiddenObjects(t *testing.T, h *proxierHarness, i int) int {
	t.Helper()
	// Objects for other proxies or headless services, added while
	// watching, stay invisible; an invalid service is counted.
	h.create(makeService("other2", withClusterIPs("10.96.0.13"), withLabels(LabelServiceProxyName, "other")))
	h.create(sliceWithLabels(makeSlice("other2", "other2-1", []sliceEP{ep("10.0.1.2")}), LabelServiceProxyName, "other"))
	h.create(makeService("bad", withClusterIPs("10.96.0.300")))
	h.create(makeService("sentinel", withClusterIPs("10.96.0.30")))
	h.create(makeSlice("sentinel", "sentinel-1", []sliceEP{ep("10.0.0.30")}))
	// Wait for the sentinel Service itself, not only its slice: slices
	// come through another informer, and only the Service informer's order
	// guarantees that "bad" (created before the sentinel) was handled.
	i, _ = h.backend.waitFor(t, i, "sentinel service and endpoints", func(s recordedSync) bool {
		return hasService(s.st, httpPort("sentinel")) && hasEndpoints(s.st, httpPort("sentinel"), "10.0.0.30:8080")
	})
	for _, s := range h.backend.all() {
		for _, n := range []string{"other-proxy", "other2", "headless", "bad"} {
			if hasService(s.st, httpPort(n)) || len(s.st.Endpoints[httpPort(n)]) > 0 {
				t.Errorf("a sync saw %s: %v", n, serviceNames(s.st))
			}
		}
	}
	if got := metricValue(t, h.metrics.InvalidObjectsTotal.WithLabelValues("Service", "cluster-ip")); got != 1 {
		t.Errorf("invalid services counted = %v, want 1", got)
	}
	return i
}

// checkSelectorsRequested: every list and watch used kube-proxy's
// selectors (services, slices) and the node name (nodes).
func checkSelectorsRequested(t *testing.T, h *proxierHarness) {
	t.Helper()
	want := "labels=\"" + ServiceSelector("").String() + "\" fields=\"\""
	for _, res := range []string{"services", "endpointslices"} {
		for _, verb := range []string{"list", "watch"} {
			for _, got := range h.log.get(verb, res) {
				if got != want {
					t.Errorf("%s %s with %s, want %s", verb, res, got, want)
				}
			}
		}
	}
	for _, got := range h.log.get("watch", "nodes") {
		if got != `labels="" fields="metadata.name=node-a"` {
			t.Errorf("node watch with %s", got)
		}
	}
}

func checkEndpointRemoved(t *testing.T, h *proxierHarness, i int) int {
	t.Helper()
	// An endpoint leaves: stale, endpoint-only change.
	h.updateSlice(makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1").on("node-a")}))
	i, s := h.backend.waitFor(t, i, "web endpoint removed", func(s recordedSync) bool {
		return hasEndpoints(s.st, httpPort("web"), "10.0.0.1:8080")
	})
	if s.diff.Full || s.diff.ServicesChanged {
		t.Errorf("endpoint removal: Full=%v ServicesChanged=%v, want false", s.diff.Full, s.diff.ServicesChanged)
	}
	if d := cmp.Diff([]string{"ns/web:http=10.0.0.2:8080"}, staleKeys(s.diff.StaleEndpoints)); d != "" {
		t.Errorf("stale endpoints (-want +got):\n%s", d)
	}
	return i
}

func checkServiceDeleted(t *testing.T, h *proxierHarness, i int) int {
	t.Helper()
	// A service deleted through the API.
	if err := h.client.CoreV1().Services(testNS).Delete(context.Background(), "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	i, s := h.backend.waitFor(t, i, "api deleted", func(s recordedSync) bool { return !hasService(s.st, httpPort("api")) })
	if _, ok := s.diff.Deleted[httpPort("api")]; !ok || !s.diff.ServicesChanged {
		t.Errorf("api deletion: Deleted=%v ServicesChanged=%v", s.diff.Deleted, s.diff.ServicesChanged)
	}
	return i
}

func checkNodeZoneChange(t *testing.T, h *proxierHarness, i int) {
	t.Helper()
	// The node moves to another zone: full sync. Another node's change is
	// not seen.
	nodeB := makeNode("node-b", "z7", "192.168.0.2")
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), nodeB, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.CoreV1().Nodes().Update(context.Background(), makeNode("node-a", "z2", "192.168.0.1"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, s := h.backend.waitFor(t, i, "zone z2", func(s recordedSync) bool { return s.st.Node.Zone == "z2" })
	if !s.diff.Full {
		t.Errorf("zone change: sync not full")
	}
	_, _, _, nodes := h.health.counts()
	for _, n := range nodes {
		if n != "node-a" {
			t.Errorf("health was told about node %q", n)
		}
	}
}

func serviceNames(st *State) []string {
	var out []string
	for n := range st.Services {
		out = append(out, n.String())
	}
	slices.Sort(out)
	return out
}

// TestProxierFailingBackend: a failed sync makes the next one full and
// carries its stale endpoints and deletions over (Diff.Merge); health and
// post-sync hooks hear only of successful syncs. MinSyncPeriod is 1s on a
// fake clock, so changes pile up until the test steps the clock.
func TestProxierFailingBackend(t *testing.T) {
	h := startProxier(t, time.Second, makeNode("node-a", "z1"), makeService("web"),
		makeService("gone", withClusterIPs("10.96.0.40")),
		makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1"), ep("10.0.0.2"), ep("10.0.0.3")}))
	h.backend.waitFor(t, 0, "first sync", func(s recordedSync) bool { return s.err == nil })

	// Failure 1, then the retry timer.
	h.backend.failNext(1)
	h.updateSlice(makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1"), ep("10.0.0.3")}))
	waitForWaiters(t, h.clock, 2) // periodic resync + MinSyncPeriod wait
	h.clock.Step(time.Second)
	i, failed := h.backend.waitFor(t, 1, "failed sync", func(s recordedSync) bool { return s.err != nil })
	if d := cmp.Diff([]string{"ns/web:http=10.0.0.2:8080"}, staleKeys(failed.diff.StaleEndpoints)); d != "" {
		t.Fatalf("failed sync stale (-want +got):\n%s", d)
	}
	waitForWaiters(t, h.clock, 2) // periodic resync + retry
	h.clock.Step(time.Second)
	i, s := h.backend.waitFor(t, i+1, "retry", func(recordedSync) bool { return true })
	if s.err != nil || !s.diff.Full {
		t.Errorf("retry: err=%v full=%v, want success and full", s.err, s.diff.Full)
	}
	if d := cmp.Diff([]string{"ns/web:http=10.0.0.2:8080"}, staleKeys(s.diff.StaleEndpoints)); d != "" {
		t.Errorf("retry stale (-want +got):\n%s", d)
	}

	// Failure 2 deletes a service and an endpoint; the next sync comes
	// from a new change (before the retry is due) and must carry the
	// deletion and the old stale endpoint along with its own.
	h.backend.failNext(1)
	if err := h.client.CoreV1().Services(testNS).Delete(context.Background(), "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.updateSlice(makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1")}))
	// Both handlers have queued their sync request: the runner took one
	// and waits for MinSyncPeriod (2 waiters), the other is in its slot.
	// (A request landing after the snapshot would trigger one more sync.)
	waitForPending(t, h.p, 1, 1)
	waitForWaiters(t, h.clock, 2)
	waitFor(t, "second sync request queued", func() bool { return len(h.p.runner.requests) == 1 })
	h.clock.Step(time.Second)
	i, failed = h.backend.waitFor(t, i+1, "failed sync", func(s recordedSync) bool { return s.err != nil })
	if _, ok := failed.diff.Deleted[httpPort("gone")]; !ok || len(failed.diff.StaleEndpoints) != 1 {
		t.Fatalf("failed sync: Deleted=%v stale=%v, want gone and 10.0.0.3", failed.diff.Deleted, failed.diff.StaleEndpoints)
	}
	h.updateSlice(makeSlice("web", "web-1", []sliceEP{}))
	waitForWaiters(t, h.clock, 3) // periodic resync + retry + MinSyncPeriod wait
	h.clock.Step(time.Second)
	_, s = h.backend.waitFor(t, i+1, "next sync", func(recordedSync) bool { return true })
	if s.err != nil || !s.diff.Full || len(s.st.Endpoints[httpPort("web")]) != 0 {
		t.Errorf("sync after failure: err=%v full=%v web endpoints=%v, want success, full, none", s.err, s.diff.Full, s.st.Endpoints[httpPort("web")])
	}
	if _, ok := s.diff.Deleted[httpPort("gone")]; !ok || !s.diff.ServicesChanged {
		t.Errorf("deletion of the failed sync lost: Deleted=%v ServicesChanged=%v", s.diff.Deleted, s.diff.ServicesChanged)
	}
	if d := cmp.Diff([]string{"ns/web:http=10.0.0.1:8080", "ns/web:http=10.0.0.3:8080"}, staleKeys(s.diff.StaleEndpoints)); d != "" {
		t.Errorf("merged stale endpoints (-want +got):\n%s", d)
	}
	if got := metricValue(t, h.metrics.SyncErrorsTotal.WithLabelValues("recording")); got != 2 {
		t.Errorf("sync errors = %v, want 2", got)
	}
	// Health and post-sync hooks run after the backend returns: wait for
	// them, then check they saw exactly the successful syncs.
	var okStates []*State
	for _, s := range h.backend.all() {
		if s.err == nil {
			okStates = append(okStates, s.given)
		}
	}
	waitFor(t, "hooks of every successful sync", func() bool {
		_, updated, post, _ := h.health.counts()
		return updated == len(okStates) && post == len(okStates)
	})
	if got := h.health.states(); !slices.Equal(got, okStates) {
		t.Errorf("post-sync hooks saw %d states, want exactly the %d successful ones", len(got), len(okStates))
	}
}

// waitFor polls cond until it holds (a condition, not a timing assert).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitForPending waits until the proxier's trackers hold the given numbers
// of pending service and endpoint changes.
func waitForPending(t *testing.T, p *Proxier, svcs, eps int) {
	t.Helper()
	waitFor(t, "pending changes", func() bool {
		s, _ := p.Snapshotter().Services.Pending()
		e, _ := p.Snapshotter().Endpoints.Pending()
		return s == svcs && e == eps
	})
}

// The informer may hand out a tombstone when it missed a delete.
func TestProxierHandlersUnwrapTombstones(t *testing.T) {
	p := New(nil, newRecordingBackend(), Config{NodeName: "node-a"}, nil, nil, nil)
	svc := makeService("web")
	slice := makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1")})
	p.serviceHandler().OnAdd(svc, true)
	p.sliceHandler().OnAdd(slice, true)
	p.Snapshotter().Snapshot()
	p.serviceHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: svc})
	p.sliceHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/web-1", Obj: slice})
	p.serviceHandler().OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: "not a service"})
	st, diff := p.Snapshotter().Snapshot()
	if len(st.Services) != 0 || len(st.Endpoints) != 0 {
		t.Errorf("after tombstones: services %v endpoints %v", st.Services, st.Endpoints)
	}
	if _, ok := diff.Deleted[httpPort("web")]; !ok {
		t.Errorf("Deleted = %v", diff.Deleted)
	}
}

// waitForWaiters waits until the fake clock has n waiters: the runner has
// armed its timers.
func waitForWaiters(t *testing.T, clk *clocktesting.FakeClock, n int) {
	t.Helper()
	waitFor(t, "fake clock waiters", func() bool { return clk.Waiters() == n })
}
