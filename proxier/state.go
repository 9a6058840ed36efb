package proxier

import (
	"context"
	"time"
)

// State is everything a backend programs: the service ports, their merged
// endpoints and the node. Backends and hooks must not modify it. Its maps
// are the change trackers' own and the next Snapshot updates them in
// place (a change costs what it changes, not a copy of 88k entries at 44k
// Services), so a State is only valid until then: what a backend needs of
// the previous sync it keeps itself or reads from Diff.Previous. The
// ServicePorts and endpoint lists in the maps are never modified; they
// may be kept.
type State struct {
	Services  map[ServicePortName]*ServicePort
	Endpoints map[ServicePortName][]Endpoint // sorted by IP then port, unique
	Node      NodeInfo
}

// StaleEndpoint is an endpoint that stopped being usable for a service port
// since the previous sync (deleted, or no longer serving).
type StaleEndpoint struct {
	Name     ServicePortName
	Endpoint Endpoint
}

// Diff says what changed between the previous successful sync and this
// State. Backends use it for partial syncs; the conntrack reconciler for
// cleanup. When Full is set a backend must rewrite everything it owns.
type Diff struct {
	Full bool
	// Verify is set on timer-driven syncs: the backend should check,
	// cheaply, that the kernel still holds what it wrote (someone may have
	// flushed or deleted a chain) and repair it, without a full rewrite.
	Verify bool
	// Changed names every service port whose service or endpoints were
	// added, updated or deleted.
	Changed map[ServicePortName]struct{}
	// Deleted names service ports that are gone (a subset of Changed).
	Deleted map[ServicePortName]*ServicePort
	// ServicesChanged is true when the set of service ports or any of their
	// addresses/ports changed, so top-level dispatch rules need rewriting.
	// It is false when only endpoints changed.
	ServicesChanged bool
	// StaleEndpoints are endpoints that went away.
	StaleEndpoints []StaleEndpoint
	// NewlyServing names UDP/SCTP service ports that went from no endpoints
	// to some (their conntrack entries may point at REJECT).
	NewlyServing map[ServicePortName]struct{}
	// TriggerTimes are the last-change-trigger-time annotations of the
	// endpoint changes included, for network programming latency.
	TriggerTimes []time.Time
	// before holds, for names in Changed, what the previous successful
	// sync saw of them: see Previous.
	before map[ServicePortName]portBefore
}

// portBefore is what the previous successful sync saw of a changed name:
// each part is set when that part changed since. A name in Changed
// without an entry had no ServicePort then.
type portBefore struct {
	service      *ServicePort
	endpoints    []Endpoint
	hasService   bool
	hasEndpoints bool
}

// Previous gives a service port as the previous successful sync saw it:
// its ServicePort (nil when there was none) and, when there was one, its
// endpoints. st is the State this Diff came with; an unchanged name is as
// st has it.
func (d *Diff) Previous(st *State, name ServicePortName) (*ServicePort, []Endpoint) {
	sp, eps := st.Services[name], st.Endpoints[name]
	if _, changed := d.Changed[name]; !changed {
		return sp, eps
	}
	b, ok := d.before[name]
	if !ok {
		return nil, nil
	}
	if b.hasService {
		sp = b.service
	}
	if b.hasEndpoints {
		eps = b.endpoints
	}
	if sp == nil {
		return nil, nil
	}
	return sp, eps
}

// SetPrevious records prev, the State of the previous successful sync,
// as what Previous gives for each name in Changed: for a Diff built by
// hand (tests, tools); Snapshot records it as it applies the changes.
func (d *Diff) SetPrevious(prev *State) {
	d.before = make(map[ServicePortName]portBefore, len(d.Changed))
	if prev == nil {
		return
	}
	for name := range d.Changed {
		if sp := prev.Services[name]; sp != nil {
			d.before[name] = portBefore{service: sp, endpoints: prev.Endpoints[name], hasService: true, hasEndpoints: true}
		}
	}
}

// recordService notes a changed name's ServicePort before this diff
// (nil: it is new). New names get no entry (see portBefore).
func (d *Diff) recordService(name ServicePortName, prev *ServicePort) {
	if prev == nil {
		return
	}
	b := d.before[name]
	b.service, b.hasService = prev, true
	d.before[name] = b
}

// recordEndpoints notes a changed name's endpoints before this diff. The
// services are applied first: a name they found new keeps no entry, its
// endpoints do not matter (Previous).
func (d *Diff) recordEndpoints(name ServicePortName, prev []Endpoint) {
	b, ok := d.before[name]
	if _, changed := d.Changed[name]; changed && !ok {
		return
	}
	b.endpoints, b.hasEndpoints = prev, true
	d.before[name] = b
}

// IsChanged reports whether a service port needs rewriting in this sync.
func (d *Diff) IsChanged(n ServicePortName) bool {
	if d == nil || d.Full {
		return true
	}
	_, ok := d.Changed[n]
	return ok
}

// SyncResult is what a backend reports about one sync.
type SyncResult struct {
	// Full is true when the backend rewrote everything (requested, or its
	// own decision, e.g. the canary chain was gone).
	Full bool
}

// Backend programs one dataplane. It knows nothing about informers: it gets
// a State and a Diff and makes the kernel match the State.
type Backend interface {
	// Name is the proxy mode ("iptables", "ipvs", "userspace").
	Name() string
	// Sync renders state and applies it. On error the runner retries with a
	// full sync; the backend must leave the previous rules in force.
	Sync(ctx context.Context, state *State, diff *Diff) (SyncResult, error)
	// Cleanup removes everything this backend ever installed.
	Cleanup(ctx context.Context) error
}
