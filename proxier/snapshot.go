package proxier

import (
	"net/netip"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Snapshotter combines the service and endpoints trackers with what is
// known of the node, and hands out State+Diff snapshots.
type Snapshotter struct {
	Services  *ServiceChangeTracker
	Endpoints *EndpointsChangeTracker

	mu          sync.Mutex
	node        NodeInfo
	nodeChanged bool
}

// NewSnapshotter returns a Snapshotter for the named node.
func NewSnapshotter(nodeName string, invalid InvalidFunc) *Snapshotter {
	return &Snapshotter{
		Services:  NewServiceChangeTracker(invalid),
		Endpoints: NewEndpointsChangeTracker(nodeName, invalid),
		node:      NodeInfo{Name: nodeName},
	}
}

// SetFamilies makes the trackers skip the Services and EndpointSlices of
// IP families other than families, telling skipped about each. Call it
// before the first update; without it nothing is skipped.
func (s *Snapshotter) SetFamilies(families []v1.IPFamily, skipped SkippedFamilyFunc) {
	f := newFamilyFilter(families, skipped)
	s.Services.families = f
	s.Endpoints.families = f
}

// UpdateNode records the node's labels, addresses and pod CIDRs. A change of the zone,
// addresses or pod CIDRs changes endpoint selection and rules for every service, so
// the next snapshot asks for a full sync. It reports whether it changed.
func (s *Snapshotter) UpdateNode(node *v1.Node) bool {
	if node == nil {
		return false
	}
	info := NodeInfoFromNode(node)
	s.mu.Lock()
	defer s.mu.Unlock()
	if info.Zone == s.node.Zone && slices.Equal(info.Addresses, s.node.Addresses) && slices.Equal(info.PodCIDRs, s.node.PodCIDRs) {
		s.node.Labels = info.Labels
		return false
	}
	info.Name = s.node.Name
	s.node = info
	s.nodeChanged = true
	return true
}

// NodeInfoFromNode extracts the node's zone, labels and addresses.
func NodeInfoFromNode(node *v1.Node) NodeInfo {
	info := NodeInfo{Name: node.Name, Labels: node.Labels, Zone: node.Labels[v1.LabelTopologyZone]}
	for _, a := range node.Status.Addresses {
		if a.Type != v1.NodeInternalIP && a.Type != v1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil && !slices.Contains(info.Addresses, ip.Unmap()) {
			info.Addresses = append(info.Addresses, ip.Unmap())
		}
	}
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			info.PodCIDRs = append(info.PodCIDRs, p.Masked())
		}
	}
	return info
}

// Snapshot consumes the pending changes and returns the new State and the
// Diff against the previous snapshot.
func (s *Snapshotter) Snapshot() (*State, *Diff) {
	diff := &Diff{
		Changed:      map[ServicePortName]struct{}{},
		Deleted:      map[ServicePortName]*ServicePort{},
		NewlyServing: map[ServicePortName]struct{}{},
		before:       map[ServicePortName]portBefore{},
	}
	st := &State{
		Services:  s.Services.apply(diff),
		Endpoints: s.Endpoints.apply(diff),
	}
	s.mu.Lock()
	st.Node = s.node
	diff.Full = s.nodeChanged
	s.nodeChanged = false
	s.mu.Unlock()
	return st, diff
}

// Merge folds an earlier diff that was never applied successfully into d,
// so that a failed sync loses no stale endpoints, deletions or trigger
// times. A port deleted earlier stays in Deleted even if d only saw an
// endpoint change for it; if it was re-created since, call DropRestored
// with the new State to take it out again.
func (d *Diff) Merge(earlier *Diff) {
	if earlier == nil {
		return
	}
	d.Full = d.Full || earlier.Full
	d.ServicesChanged = d.ServicesChanged || earlier.ServicesChanged
	for k, v := range earlier.Deleted {
		if _, ok := d.Deleted[k]; !ok {
			d.Deleted[k] = v
		}
	}
	d.mergeBefore(earlier)
	for k := range earlier.Changed {
		d.Changed[k] = struct{}{}
	}
	for k := range earlier.NewlyServing {
		d.NewlyServing[k] = struct{}{}
	}
	d.StaleEndpoints = append(earlier.StaleEndpoints, d.StaleEndpoints...)
	d.TriggerTimes = append(earlier.TriggerTimes, d.TriggerTimes...)
}

// mergeBefore keeps, of each name earlier changed, what the sync before
// earlier saw: earlier's parts win, and a name new in earlier is new.
// Call it before earlier's names join d.Changed.
func (d *Diff) mergeBefore(earlier *Diff) {
	if d.before == nil {
		d.before = map[ServicePortName]portBefore{}
	}
	for k := range earlier.Changed {
		e, ok := earlier.before[k]
		if !ok {
			delete(d.before, k)
			continue
		}
		b, seen := d.before[k]
		if _, changed := d.Changed[k]; changed && !seen {
			// d found its ServicePort new: there was none after earlier,
			// nor before it unless earlier deleted it (e says so).
			b = portBefore{hasService: true}
		}
		if e.hasService {
			b.service, b.hasService = e.service, true
		}
		if e.hasEndpoints {
			b.endpoints, b.hasEndpoints = e.endpoints, true
		}
		d.before[k] = b
	}
}

// DropRestored removes from Deleted the ports st has again: a port
// deleted in a failed sync and re-created before the next one is not
// gone. (Merge alone cannot tell a re-created port from one that only had
// an endpoint change: both are just in Changed.)
func (d *Diff) DropRestored(st *State) {
	for k := range d.Deleted {
		if _, ok := st.Services[k]; ok {
			delete(d.Deleted, k)
		}
	}
}
