package userspace

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// skippedPorts tracks the service ports this mode cannot proxy (SCTP: Go's
// net package has no SCTP sockets, and upstream's userspace proxier never
// proxied SCTP either). Each is logged once, when first seen, not at every
// sync, and counted in switchyard_userspace_skipped_service_ports.
type skippedPorts struct {
	seen map[proxier.ServicePortName]struct{}
	// warned: the one-time warning about the mode's limit was logged.
	warned bool
}

// skippedPortsOf lists the service ports of st the userspace proxy does
// not serve, sorted by name.
func skippedPortsOf(st *proxier.State) []proxier.ServicePortName {
	var out []proxier.ServicePortName
	for name, sp := range st.Services {
		if !proxied(sp.Protocol) {
			out = append(out, name)
		}
	}
	slices.SortFunc(out, compareNames)
	return out
}

// note logs the unproxied service ports of st that are new since the
// last sync (and returns them), forgets the ones that are gone, and sets
// the gauge per protocol.
func (s *skippedPorts) note(st *proxier.State, gauge *prometheus.GaugeVec) (logged []proxier.ServicePortName) {
	now := skippedPortsOf(st)
	if len(now) > 0 && !s.warned {
		s.warned = true
		klog.InfoS("Warning: userspace proxy mode cannot proxy SCTP; SCTP service ports get no rules and no proxy socket",
			"skipped", len(now))
	}
	next := make(map[proxier.ServicePortName]struct{}, len(now))
	counts := map[v1.Protocol]int{}
	for _, name := range now {
		next[name] = struct{}{}
		counts[st.Services[name].Protocol]++
		if _, ok := s.seen[name]; !ok {
			logged = append(logged, name)
			klog.InfoS("Warning: skipping service port the userspace proxy cannot serve",
				"servicePort", name.String(), "protocol", st.Services[name].Protocol)
		}
	}
	for name := range s.seen {
		if _, ok := next[name]; !ok {
			klog.V(2).InfoS("Skipped service port is gone", "servicePort", name.String())
		}
	}
	s.seen = next
	for proto, n := range counts {
		gauge.WithLabelValues(string(proto)).Set(float64(n))
	}
	// Protocols with nothing skipped any more read 0, not a stale count.
	for _, proto := range []v1.Protocol{v1.ProtocolSCTP} {
		if counts[proto] == 0 {
			gauge.WithLabelValues(string(proto)).Set(0)
		}
	}
	return logged
}
