package nftables

import "github.com/prometheus/client_golang/prometheus"

// modeMetrics are the counters upstream kube-proxy's nftables mode
// exports, under the same names.
type modeMetrics struct {
	syncFailures    prometheus.Counter
	cleanupFailures prometheus.Counter
	elementOps      *prometheus.CounterVec
}

func newModeMetrics(reg prometheus.Registerer) *modeMetrics {
	m := &modeMetrics{
		syncFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_nftables_sync_failures_total",
			Help: "Cumulative proxy nftables sync failures",
		}),
		cleanupFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubeproxy", Name: "sync_proxy_rules_nftables_cleanup_failures_total",
			Help: "Cumulative proxy nftables cleanup failures",
		}),
		elementOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "switchyard", Name: "nftables_operations_total",
			Help: "Rules added and set elements added or deleted by nftables syncs",
		}, []string{"operation"}),
	}
	if reg != nil {
		reg.MustRegister(m.syncFailures, m.cleanupFailures, m.elementOps)
	}
	return m
}

func (m *modeMetrics) record(r syncResult) {
	m.elementOps.WithLabelValues("add_rule").Add(float64(r.rules))
	m.elementOps.WithLabelValues("add_element").Add(float64(r.added))
	m.elementOps.WithLabelValues("delete_element").Add(float64(r.deleted))
}
