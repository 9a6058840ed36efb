package proxier

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestProxierRedeliveredObjectsQueueNothing: when the apiserver comes back
// after an outage, the informers list again and hand every object over
// once more, unchanged but for its resourceVersion. That must queue no
// sync and leave no health update pending: /healthz and /livez stay 200
// through an outage and the relist after it (docs/health.md), and only
// what changed meanwhile costs a sync.
func TestProxierRedeliveredObjectsQueueNothing(t *testing.T) {
	h := startProxier(t, 0, informerTestObjects()...)
	i, _ := h.backend.waitFor(t, 0, "the first sync", func(recordedSync) bool { return true })
	queued0, _, _, _ := h.health.counts()

	web := makeService("web")
	web.ResourceVersion = "1000"
	if _, err := h.client.CoreV1().Services(testNS).Update(context.Background(), web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := makeSlice("web", "web-1", []sliceEP{ep("10.0.0.1").on("node-a"), ep("10.0.0.2").on("node-b")})
	slice.ResourceVersion = "1001"
	h.updateSlice(slice)
	// A real change after them on each informer: once it is synced, the
	// redelivered objects were handled (an informer's handlers run in
	// order).
	h.create(makeService("sentinel", withClusterIPs("10.96.0.30")))
	h.create(makeSlice("sentinel", "sentinel-1", []sliceEP{ep("10.0.0.30")}))
	h.backend.waitFor(t, i+1, "the sentinel", func(s recordedSync) bool {
		return hasService(s.st, httpPort("sentinel")) && hasEndpoints(s.st, httpPort("sentinel"), "10.0.0.30:8080")
	})
	if queued, _, _, _ := h.health.counts(); queued-queued0 != 2 {
		t.Errorf("%d updates queued, want 2 (the sentinel Service and slice; the redelivered web and its slice none)", queued-queued0)
	}
}
