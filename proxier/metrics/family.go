package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// Family is the ip_family label value of f, as kube-proxy writes it
// ("IPv4", "IPv6"); an unset family counts as IPv4, the default.
func Family(f v1.IPFamily) string {
	if f == "" {
		return string(v1.IPv4Protocol)
	}
	return string(f)
}

// InitFamilies creates the series of every family-labelled metric for
// the families the daemon serves, at zero, so that a dashboard or an
// alert using rate() or increase() sees 0 from the start instead of "no
// data" until the first event. kube-proxy creates them on first use;
// the names, labels and values are the same.
func (m *Metrics) InitFamilies(families ...v1.IPFamily) {
	for _, f := range families {
		fam := Family(f)
		for _, h := range []*prometheus.HistogramVec{m.SyncProxyRulesLatency, m.SyncFullProxyRulesLatency,
			m.SyncPartialProxyRulesLatency, m.NetworkProgrammingLatency, m.ConntrackReconcilerSyncLatency} {
			h.WithLabelValues(fam)
		}
		for _, c := range []*prometheus.CounterVec{m.IPTablesRestoreFailuresTotal,
			m.IPTablesPartialRestoreFailuresTotal, m.ConntrackReconcilerDeletedEntriesTotal} {
			c.WithLabelValues(fam)
		}
		for _, p := range []string{TrafficPolicyInternal, TrafficPolicyExternal} {
			m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(p, fam).Set(0)
		}
	}
}
