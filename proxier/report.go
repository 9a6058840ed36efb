package proxier

import (
	"net/netip"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// report publishes the outcome of a successful sync: metrics, health, and
// the health-check node port servers.
func (p *Proxier) report(st *State, diff *Diff, full bool, elapsed time.Duration) {
	if p.health != nil {
		p.health.Updated()
	}
	p.locals.update(st, diff)
	counts := countLocal(st, p.locals, p.cfg.Family)
	if p.svcHealth != nil {
		if err := p.svcHealth.SyncServices(counts.hcPorts); err != nil {
			klog.ErrorS(err, "Failed to sync health-check node ports")
		}
		p.svcHealth.SyncEndpoints(counts.local)
	}
	if p.metrics == nil {
		return
	}
	p.reportMetrics(p.metrics, diff, counts, full, elapsed)
}

// reportMetrics records a successful sync under each family it
// programmed; network programming latency goes to the primary family
// (trigger times carry no family) and so do the no-local-endpoint counts,
// which countLocal computes for the primary family.
func (p *Proxier) reportMetrics(m *metrics.Metrics, diff *Diff, counts localCounts, full bool, elapsed time.Duration) {
	kind := m.SyncPartialProxyRulesLatency
	if full {
		kind = m.SyncFullProxyRulesLatency
	}
	for _, f := range p.cfg.Families {
		fam := metrics.Family(f)
		m.SyncProxyRulesLatency.WithLabelValues(fam).Observe(elapsed.Seconds())
		kind.WithLabelValues(fam).Observe(elapsed.Seconds())
		m.SyncProxyRulesLastTimestamp.WithLabelValues(fam).SetToCurrentTime()
	}
	primary := metrics.Family(p.cfg.Family)
	now := p.cfg.Clock.Now()
	npl := m.NetworkProgrammingLatency.WithLabelValues(primary)
	for _, t := range diff.TriggerTimes {
		npl.Observe(now.Sub(t).Seconds())
	}
	m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(metrics.TrafficPolicyInternal, primary).Set(float64(counts.noLocalInternal))
	m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(metrics.TrafficPolicyExternal, primary).Set(float64(counts.noLocalExternal))
}

type localCounts struct {
	hcPorts         map[types.NamespacedName]uint16
	local           map[types.NamespacedName]int
	noLocalInternal int
	noLocalExternal int
}

// localReadyIPs adds the IPs of the node's ready endpoints to set. Only
// ready ones count: with nothing but terminating endpoints the health
// check must fail so load balancers drain the node (KEP-1669). IPs, not
// IP:port pairs, so a pod serving two ports counts once.
func localReadyIPs(set map[netip.Addr]struct{}, local []Endpoint) map[netip.Addr]struct{} {
	for i := range local {
		if !local[i].Ready {
			continue
		}
		if set == nil {
			set = map[netip.Addr]struct{}{}
		}
		set[local[i].IP] = struct{}{}
	}
	return set
}

// localPorts names the service ports that use Local endpoints (a policy
// of Local), so that a sync's report walks those, not every port: it is
// brought up to date from each synced Diff's changed ports, and rebuilt
// from the State on a full one.
type localPorts map[ServicePortName]struct{}

func (l *localPorts) update(st *State, diff *Diff) {
	if *l == nil || diff.Full {
		*l = localPorts{}
		for name, sp := range st.Services {
			if sp.UsesLocalEndpoints() {
				(*l)[name] = struct{}{}
			}
		}
		return
	}
	for name := range diff.Changed {
		if sp := st.Services[name]; sp != nil && sp.UsesLocalEndpoints() {
			(*l)[name] = struct{}{}
		} else {
			delete(*l, name)
		}
	}
}

// countLocal walks the Local-policy ports once: health-check node ports
// with their local ready endpoint counts, and service ports whose Local
// policy has no local endpoint while the service has endpoints elsewhere
// (kube-proxy's sync_proxy_rules_no_local_endpoints_total).
func countLocal(st *State, locals localPorts, family v1.IPFamily) localCounts {
	c := localCounts{hcPorts: map[types.NamespacedName]uint16{}, local: map[types.NamespacedName]int{}}
	ready := map[types.NamespacedName]map[netip.Addr]struct{}{}
	for name := range locals {
		sp := st.Services[name]
		sel := SelectEndpoints(sp, st.Endpoints[name], st.Node, family)
		if sp.HealthCheckNodePort != 0 {
			c.hcPorts[name.NamespacedName] = sp.HealthCheckNodePort
			ready[name.NamespacedName] = localReadyIPs(ready[name.NamespacedName], sel.Local)
			c.local[name.NamespacedName] = len(ready[name.NamespacedName])
		}
		if len(sel.Local) > 0 || !sel.HasAny {
			continue
		}
		if sp.InternalPolicyLocal {
			c.noLocalInternal++
		}
		if sp.ExternallyAccessible() && sp.ExternalPolicyLocal {
			c.noLocalExternal++
		}
	}
	return c
}
