package proxier

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/shrink"
)

// EndpointsChangeTracker keeps the EndpointSlices of every Service, merged
// into endpoints per service port, and the changes pending since the last
// snapshot (the merged endpoints as last applied, per changed Service).
// Several slices per Service are merged and duplicates across slices
// collapse to one endpoint.
type EndpointsChangeTracker struct {
	nodeName string
	invalid  InvalidFunc
	// families skips slices of families the node does not program (nil:
	// none skipped).
	families   *familyFilter
	topologies *topologyInterner

	mu sync.Mutex
	// slices are each Service's slices, sorted by name: the informer
	// cache's compact forms, shared.
	slices map[types.NamespacedName][]*sliceInfo
	// applied holds each Service's merged endpoints as last applied, per
	// port sorted by name; flat holds the same endpoints by port.
	applied map[types.NamespacedName][]portEndpoints
	flat    map[ServicePortName][]Endpoint
	// peaks let the maps above give back their space after mass
	// deletions.
	peaks   trackerPeaks
	pending map[types.NamespacedName]*endpointsChange
	total   int64
}

type endpointsChange struct {
	previous []portEndpoints
	current  []portEndpoints
	triggers []time.Time
}

// NewEndpointsChangeTracker returns an empty tracker for the node named
// nodeName (which decides Endpoint.IsLocal). invalid may be nil.
func NewEndpointsChangeTracker(nodeName string, invalid InvalidFunc) *EndpointsChangeTracker {
	if invalid == nil {
		invalid = func(string, string) {}
	}
	return &EndpointsChangeTracker{
		nodeName:   nodeName,
		invalid:    invalid,
		topologies: newTopologyInterner(),
		slices:     map[types.NamespacedName][]*sliceInfo{},
		applied:    map[types.NamespacedName][]portEndpoints{},
		flat:       map[ServicePortName][]Endpoint{},
		pending:    map[types.NamespacedName]*endpointsChange{},
	}
}

// Update records an added or updated slice (removed=false) or a deleted
// one (removed=true). It reports whether a change is now pending for the
// slice's Service. Slices without a service-name label are ignored.
func (t *EndpointsChangeTracker) Update(s *discovery.EndpointSlice, removed bool) bool {
	if s == nil {
		return false
	}
	if removed {
		// Only the names matter: no conversion, so no invalid parts
		// reported again.
		info := &sliceInfo{namespace: s.Namespace, name: s.Name}
		info.trigger, _ = triggerTime(s)
		if svc, ok := serviceOfSlice(s); ok {
			info.service = svc.Name
		}
		return t.update(info, true)
	}
	return t.update(t.convert(s), false)
}

// convert returns the compact form of a slice.
func (t *EndpointsChangeTracker) convert(s *discovery.EndpointSlice) *sliceInfo {
	return newSliceInfo(s, t.nodeName, t.topologies, t.invalid, t.families)
}

// update is Update for a slice's compact form, as the informer hands it out.
func (t *EndpointsChangeTracker) update(s *sliceInfo, removed bool) bool {
	if s.service == "" {
		t.invalid("EndpointSlice", "service-name")
		klog.V(2).InfoS("Ignoring endpoint slice without a service name label", "slice", klog.KObj(s))
		return false
	}
	svc := types.NamespacedName{Namespace: s.namespace, Name: s.service}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total++
	t.storeSliceLocked(svc, s, removed)
	ch, ok := t.pending[svc]
	if !ok {
		ch = &endpointsChange{previous: t.applied[svc]}
		t.pending[svc] = ch
	}
	ch.current = mergeSlices(svc, t.slices[svc])
	if !s.trigger.IsZero() {
		ch.triggers = append(ch.triggers, s.trigger)
	}
	if reflect.DeepEqual(ch.previous, ch.current) || (len(ch.previous) == 0 && len(ch.current) == 0) {
		delete(t.pending, svc)
		return false
	}
	return true
}

// storeSliceLocked puts s in (or, removed, takes it out of) its Service's
// list, kept sorted by name.
func (t *EndpointsChangeTracker) storeSliceLocked(svc types.NamespacedName, s *sliceInfo, removed bool) {
	list := t.slices[svc]
	i, found := slices.BinarySearchFunc(list, s.name, func(x *sliceInfo, name string) int { return strings.Compare(x.name, name) })
	switch {
	case removed && found:
		list = slices.Delete(list, i, i+1)
	case removed:
	case found:
		list[i] = s
	default:
		list = slices.Insert(list, i, s)
	}
	if len(list) == 0 {
		delete(t.slices, svc)
		return
	}
	t.slices[svc] = list
}

// Pending returns the number of Services with endpoint changes not yet
// snapshotted, and the number of slice changes recorded so far.
func (t *EndpointsChangeTracker) Pending() (pending int, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending), t.total
}

// apply folds pending changes into the applied endpoints, records them in
// diff and returns the flattened endpoints: a map the tracker no longer
// writes (see nextFlat).
func (t *EndpointsChangeTracker) apply(diff *Diff) map[ServicePortName][]Endpoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	adds := 0
	for _, ch := range t.pending {
		adds += len(ch.current)
	}
	t.flat = nextFlat(t.flat, &t.peaks.flat, len(t.pending), adds, func(flat map[ServicePortName][]Endpoint) {
		for svc, ch := range t.pending {
			recordEndpointsDiff(diff, ch)
			diff.TriggerTimes = append(diff.TriggerTimes, ch.triggers...)
			for _, pe := range ch.previous {
				delete(flat, pe.name)
			}
			for _, pe := range ch.current {
				flat[pe.name] = pe.endpoints
			}
			if len(ch.current) == 0 {
				delete(t.applied, svc)
			} else {
				t.applied[svc] = ch.current
			}
		}
	})
	t.pending = shrink.Clear(t.pending)
	t.compactLocked()
	return t.flat
}

func recordEndpointsDiff(diff *Diff, ch *endpointsChange) {
	walkSorted(ch.previous, ch.current, func(pe *portEndpoints) ServicePortName { return pe.name },
		func(prev, cur *portEndpoints) {
			if prev == nil {
				diff.recordEndpoints(cur.name, nil)
				diff.Changed[cur.name] = struct{}{}
				if conntrackProtocol(cur.name) && anyServing(cur.endpoints) {
					diff.NewlyServing[cur.name] = struct{}{}
				}
				return
			}
			var eps []Endpoint
			if cur != nil {
				eps = cur.endpoints
				if reflect.DeepEqual(prev.endpoints, eps) {
					return
				}
			}
			spn := prev.name
			diff.recordEndpoints(spn, prev.endpoints)
			diff.Changed[spn] = struct{}{}
			diff.StaleEndpoints = append(diff.StaleEndpoints, staleEndpoints(spn, prev.endpoints, eps)...)
			if conntrackProtocol(spn) && !anyServing(prev.endpoints) && anyServing(eps) {
				diff.NewlyServing[spn] = struct{}{}
			}
		})
}

// conntrackProtocol reports whether the port's protocol keeps conntrack
// entries that may point at REJECT while it had no endpoints (UDP, SCTP):
// only those are reported in Diff.NewlyServing.
func conntrackProtocol(spn ServicePortName) bool {
	return spn.Protocol == v1.ProtocolUDP || spn.Protocol == v1.ProtocolSCTP
}

// staleEndpoints lists endpoints of prev that could receive traffic and
// are gone from cur or no longer usable. "Usable" is the same predicate
// endpoint selection uses, so the two never disagree.
func staleEndpoints(spn ServicePortName, prev, cur []Endpoint) []StaleEndpoint {
	still := make(map[netip.AddrPort]bool, len(cur))
	for i := range cur {
		still[cur[i].Key()] = usable(&cur[i])
	}
	var out []StaleEndpoint
	for i := range prev {
		e := prev[i]
		if usable(&e) && !still[e.Key()] {
			out = append(out, StaleEndpoint{Name: spn, Endpoint: e})
		}
	}
	return out
}

func anyServing(eps []Endpoint) bool {
	for i := range eps {
		if usable(&eps[i]) {
			return true
		}
	}
	return false
}

func (t *EndpointsChangeTracker) compactLocked() {
	t.slices = shrink.Map(t.slices, &t.peaks.slices)
	t.applied = shrink.Map(t.applied, &t.peaks.applied)
}
