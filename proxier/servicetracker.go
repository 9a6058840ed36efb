package proxier

import (
	"reflect"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/internal/shrink"
)

// ServiceChangeTracker keeps the service ports the proxier programs and the
// changes pending since the last snapshot: for each changed Service, the
// ports as last applied (previous) and as now (current). A change that
// returns a Service to what was applied is dropped.
type ServiceChangeTracker struct {
	invalid InvalidFunc
	// families skips Services of families the node does not program
	// (nil: none skipped).
	families *familyFilter

	mu sync.Mutex
	// applied holds each Service's ports as last applied: the compact
	// form's own list (sorted by name), not a copy; flat holds the same
	// ports by name.
	applied map[types.NamespacedName][]*ServicePort
	flat    map[ServicePortName]*ServicePort
	// peaks let the maps above give back their space after mass
	// deletions.
	peaks   trackerPeaks
	pending map[types.NamespacedName]*serviceChange
	total   int64
}

// serviceChange is one Service's ports as last applied and as now, each
// sorted by name (as serviceInfo keeps them).
type serviceChange struct {
	previous []*ServicePort
	current  []*ServicePort
}

// NewServiceChangeTracker returns an empty tracker. invalid may be nil.
func NewServiceChangeTracker(invalid InvalidFunc) *ServiceChangeTracker {
	if invalid == nil {
		invalid = func(string, string) {}
	}
	return &ServiceChangeTracker{
		invalid: invalid,
		applied: map[types.NamespacedName][]*ServicePort{},
		flat:    map[ServicePortName]*ServicePort{},
		pending: map[types.NamespacedName]*serviceChange{},
	}
}

// Update records a change from old to cur (either may be nil for add and
// delete). It reports whether a change is now pending for that Service.
func (t *ServiceChangeTracker) Update(old, cur *v1.Service) bool {
	var o, c *serviceInfo
	if old != nil {
		o = &serviceInfo{name: types.NamespacedName{Namespace: old.Namespace, Name: old.Name}}
	}
	if cur != nil {
		c = t.convert(cur)
	}
	return t.update(o, c)
}

// convert returns the compact form of a Service.
func (t *ServiceChangeTracker) convert(svc *v1.Service) *serviceInfo {
	return newServiceInfo(svc, t.invalid, t.families)
}

// update is Update for the compact forms the informer hands out.
func (t *ServiceChangeTracker) update(old, cur *serviceInfo) bool {
	svc := cur
	if svc == nil {
		svc = old
	}
	if svc == nil {
		return false
	}
	key := svc.name
	var ports []*ServicePort
	if cur != nil {
		ports = cur.ports
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	t.total++
	ch, ok := t.pending[key]
	if !ok {
		ch = &serviceChange{previous: t.applied[key]}
		t.pending[key] = ch
	}
	ch.current = ports
	if servicePortsEqual(ch.previous, ch.current) {
		delete(t.pending, key)
		return false
	}
	return true
}

// Pending returns the number of Services with changes not yet snapshotted,
// and the number of changes recorded since the tracker was made.
func (t *ServiceChangeTracker) Pending() (pending int, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending), t.total
}

// apply folds the pending changes into the applied set and records them in
// diff. It returns the flattened service ports: a map the tracker no
// longer writes (see nextFlat).
func (t *ServiceChangeTracker) apply(diff *Diff) map[ServicePortName]*ServicePort {
	t.mu.Lock()
	defer t.mu.Unlock()
	adds := 0
	for _, ch := range t.pending {
		adds += len(ch.current)
	}
	t.flat = nextFlat(t.flat, &t.peaks.flat, len(t.pending), adds, func(flat map[ServicePortName]*ServicePort) {
		for key, ch := range t.pending {
			recordServiceDiff(diff, ch)
			for _, sp := range ch.previous {
				delete(flat, sp.Name)
			}
			for _, sp := range ch.current {
				flat[sp.Name] = sp
			}
			if len(ch.current) == 0 {
				delete(t.applied, key)
			} else {
				t.applied[key] = ch.current
			}
		}
	})
	t.pending = shrink.Clear(t.pending)
	t.applied = shrink.Map(t.applied, &t.peaks.applied)
	return t.flat
}

func recordServiceDiff(diff *Diff, ch *serviceChange) {
	walkSorted(ch.previous, ch.current, func(sp **ServicePort) ServicePortName { return (*sp).Name },
		func(prev, cur **ServicePort) {
			switch {
			case cur == nil:
				diff.Changed[(*prev).Name] = struct{}{}
				diff.Deleted[(*prev).Name] = *prev
				diff.recordService((*prev).Name, *prev)
				diff.ServicesChanged = true
			case prev == nil:
				diff.Changed[(*cur).Name] = struct{}{}
				delete(diff.Deleted, (*cur).Name)
				diff.ServicesChanged = true
			case !servicePortEqual(*prev, *cur):
				diff.Changed[(*cur).Name] = struct{}{}
				diff.recordService((*cur).Name, *prev)
				diff.ServicesChanged = true
			}
		})
}

// servicePortsEqual compares two lists sorted by name.
func servicePortsEqual(a, b []*ServicePort) bool {
	return slices.EqualFunc(a, b, servicePortEqual)
}

func servicePortEqual(a, b *ServicePort) bool { return a == b || reflect.DeepEqual(a, b) }
