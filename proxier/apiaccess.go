package proxier

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// accessLogEvery rate-limits the log lines of accessReporter and
// waitForCaches per resource: client-go retries a failed list with a
// backoff of at most 30 seconds, forever.
const accessLogEvery = 30 * time.Second

// accessReporter turns the informers' list/watch errors into log lines an
// operator can act on. A missing or wrong ClusterRoleBinding makes every
// list fail with 403; client-go retries forever and, by default, logs a
// generic "Failed to watch" line, so the daemon looks merely slow while it
// programs nothing. This says what is denied and what to check, once per
// accessLogEvery and resource. Other errors keep client-go's handling.
type accessReporter struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	last  map[string]time.Time
}

func newAccessReporter(clk clock.PassiveClock) *accessReporter {
	return &accessReporter{clock: clk, last: map[string]time.Time{}}
}

// handler is the watch error handler of the informer of resource.
func (a *accessReporter) handler(resource string) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		denied := apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)
		if !denied {
			cache.DefaultWatchErrorHandler(ctx, r, err)
			return
		}
		if a.due(resource) {
			klog.ErrorS(err, "The API server denies switchyard access; nothing is programmed until it is granted. "+
				"Check the switchyard ServiceAccount's ClusterRole and ClusterRoleBinding (deploy/clusterrole*.yaml)",
				"resource", resource, "forbidden", apierrors.IsForbidden(err))
		}
	}
}

func (a *accessReporter) due(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	if last, ok := a.last[key]; ok && now.Sub(last) < accessLogEvery {
		return false
	}
	a.last[key] = now
	return true
}

// namedSync is one informer's handler registration, for waitForCaches.
type namedSync struct {
	resource string
	synced   cache.InformerSynced
}

// waitForCaches waits until every handler has seen its informer's initial
// list, saying every accessLogEvery which ones are still missing. It
// returns false if ctx ends first. Normal starts log nothing.
func waitForCaches(ctx context.Context, a *accessReporter, syncs []namedSync) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	a.due("waiting for caches") // quiet for the first accessLogEvery
	for {
		var missing []string
		for _, s := range syncs {
			if !s.synced() {
				missing = append(missing, s.resource)
			}
		}
		if len(missing) == 0 {
			return true
		}
		if a.due("waiting for caches") {
			klog.InfoS("Waiting for the initial list of API objects before the first sync", "missing", missing)
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
