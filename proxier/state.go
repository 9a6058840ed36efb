package proxier

import (
	"context"
	"time"
)

// State is an immutable snapshot of everything a backend programs: the
// service ports, their merged endpoints and the node. Backends must not
// modify it; it is shared between the runner, the backend and the conntrack
// reconciler.
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
