package conntrack

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// needsPass decides from the Diff whether a sync can have left stale
// entries: a full sync (the reconciler knows nothing of what happened
// before, e.g. after a restart), a failed earlier pass, a UDP/SCTP
// endpoint that went away, a UDP/SCTP port that was deleted or got its
// first endpoints, or a service address that disappeared. A nil Diff
// counts as full.
func (r *Reconciler) needsPass(diff *proxier.Diff, anyGone bool) bool {
	if r.retry || anyGone || diff == nil || diff.Full {
		return true
	}
	for _, s := range diff.StaleEndpoints {
		if handled(s.Name) {
			return true
		}
	}
	for name := range diff.Deleted {
		if handled(name) {
			return true
		}
	}
	for name := range diff.NewlyServing {
		if handled(name) {
			return true
		}
	}
	return false
}

// handled reports whether the reconciler cleans the port's protocol.
func handled(name proxier.ServicePortName) bool {
	_, ok := protoNumber(name.Protocol)
	return ok
}

// goneKeys returns the service addresses that no current service uses:
// those of the previous sync missing from current, and those of the ports
// diff deleted (which cover a reconciler that missed the previous sync).
func goneKeys(prev, current keySet, diff *proxier.Diff, families []v1.IPFamily, nodeIPs []netip.Addr) keySet {
	gone := keySet{}
	add := func(k flowKey) {
		if _, ok := current[k]; !ok {
			gone[k] = struct{}{}
		}
	}
	for k := range prev {
		add(k)
	}
	if diff == nil {
		return gone
	}
	for _, sp := range diff.Deleted {
		for _, fam := range families {
			forEachKey(sp, fam, nodeIPs, add)
		}
	}
	return gone
}
