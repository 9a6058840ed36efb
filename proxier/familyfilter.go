package proxier

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
)

// SkippedFamilyFunc is told about every Service or EndpointSlice the
// proxier skips because it is of an IP family the node does not program
// (kind "Service" or "EndpointSlice").
type SkippedFamilyFunc func(kind string, family v1.IPFamily)

// familyFilter skips the Services and EndpointSlices of IP families the
// node does not program, as kube-proxy's per-family trackers do: a
// single-stack IPv6 Service on an IPv4-only node, or the IPv6 slice of a
// dual-stack Service there. A Service with a cluster IP of a programmed
// family is kept (its other family is simply not rendered). A nil filter
// skips nothing.
type familyFilter struct {
	programs map[v1.IPFamily]bool
	skipped  SkippedFamilyFunc

	mu     sync.Mutex
	logged map[string]bool // kind/family told at the default verbosity
}

func newFamilyFilter(families []v1.IPFamily, skipped SkippedFamilyFunc) *familyFilter {
	f := &familyFilter{programs: map[v1.IPFamily]bool{}, skipped: skipped, logged: map[string]bool{}}
	for _, fam := range families {
		f.programs[fam] = true
	}
	return f
}

// skipsService reports (and counts) a proxied Service none of whose
// cluster IPs is of a programmed family. Services with unparsable cluster
// IPs are left to the conversion, which reports them as invalid.
func (f *familyFilter) skipsService(svc *v1.Service) bool {
	if f == nil || !serviceIsProxied(svc) {
		return false
	}
	ips, ok := parseClusterIPs(svc)
	if !ok || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if f.programs[FamilyOf(ip)] {
			return false
		}
	}
	f.report("Service", FamilyOf(ips[0]), svc)
	return true
}

// skipsSlice reports (and counts) a slice of an address type whose family
// the node does not program (FQDN slices are dropped by the conversion).
func (f *familyFilter) skipsSlice(s *discovery.EndpointSlice) bool {
	if f == nil {
		return false
	}
	fam, ok := sliceFamily(s)
	if !ok || f.programs[fam] {
		return false
	}
	f.report("EndpointSlice", fam, s)
	return true
}

// report counts a skipped object and logs it: the first of each kind and
// family at the default verbosity, every one at -v=2.
func (f *familyFilter) report(kind string, fam v1.IPFamily, obj klog.KMetadata) {
	if f.skipped != nil {
		f.skipped(kind, fam)
	}
	f.mu.Lock()
	first := !f.logged[kind+"/"+string(fam)]
	f.logged[kind+"/"+string(fam)] = true
	f.mu.Unlock()
	if first {
		klog.InfoS("Skipping objects of an IP family this node does not program; each one is logged at -v=2 and counted in switchyard_skipped_family_objects_total",
			"kind", kind, "ipFamily", fam, "first", klog.KObj(obj))
		return
	}
	klog.V(2).InfoS("Skipping an object of an IP family this node does not program", "kind", kind, "ipFamily", fam, "object", klog.KObj(obj))
}
