package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// syncBuckets are upstream's buckets for rule-sync durations:
// 1ms, 2ms, 4ms, ... 16.384s.
func syncBuckets() []float64 { return prometheus.ExponentialBuckets(0.001, 2, 15) }

// networkProgrammingBuckets are upstream's buckets for network programming
// latency: 0 (upstream's merge helper starts with it), 0.25s, 0.5s, every
// second up to 59s, every 5s up to 115s, every 30s up to 5min.
func networkProgrammingBuckets() []float64 {
	b := []float64{0}
	b = append(b, prometheus.LinearBuckets(0.25, 0.25, 2)...)
	b = append(b, prometheus.LinearBuckets(1, 1, 59)...)
	b = append(b, prometheus.LinearBuckets(60, 5, 12)...)
	return append(b, prometheus.LinearBuckets(120, 30, 7)...)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: kubeProxySubsystem, Name: name, Help: help, Buckets: buckets,
	}, labels)
}

func gauge(name, help string) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: kubeProxySubsystem, Name: name, Help: help,
	})
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: kubeProxySubsystem, Name: name, Help: help,
	})
}

func gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: kubeProxySubsystem, Name: name, Help: help,
	}, labels)
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: kubeProxySubsystem, Name: name, Help: help,
	}, labels)
}

func (m *Metrics) initSync() {
	m.SyncProxyRulesLatency = histogramVec("sync_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds", syncBuckets(), LabelIPFamily)
	m.SyncFullProxyRulesLatency = histogramVec("sync_full_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds for full resyncs", syncBuckets(), LabelIPFamily)
	m.SyncPartialProxyRulesLatency = histogramVec("sync_partial_proxy_rules_duration_seconds",
		"SyncProxyRules latency in seconds for partial resyncs", syncBuckets(), LabelIPFamily)
	m.NetworkProgrammingLatency = histogramVec("network_programming_duration_seconds",
		"In Cluster Network Programming Latency in seconds", networkProgrammingBuckets(), LabelIPFamily)
	m.SyncProxyRulesLastTimestamp = gaugeVec("sync_proxy_rules_last_timestamp_seconds",
		"The last time proxy rules were successfully synced", LabelIPFamily)
	m.SyncProxyRulesLastQueuedTimestamp = gaugeVec("sync_proxy_rules_last_queued_timestamp_seconds",
		"The last time a sync of proxy rules was queued", LabelIPFamily)
	m.SyncProxyRulesNoLocalEndpointsTotal = gaugeVec("sync_proxy_rules_no_local_endpoints_total",
		"Number of services with a Local traffic policy and no endpoints", "traffic_policy", LabelIPFamily)
}

func (m *Metrics) initChanges() {
	m.EndpointChangesPending = gauge("sync_proxy_rules_endpoint_changes_pending",
		"Pending proxy rules Endpoint changes")
	m.EndpointChangesTotal = counter("sync_proxy_rules_endpoint_changes_total",
		"Cumulative proxy rules Endpoint changes")
	m.ServiceChangesPending = gauge("sync_proxy_rules_service_changes_pending",
		"Pending proxy rules Service changes")
	m.ServiceChangesTotal = counter("sync_proxy_rules_service_changes_total",
		"Cumulative proxy rules Service changes")
}

func (m *Metrics) initIPTables() {
	m.IPTablesRulesTotal = gaugeVec("sync_proxy_rules_iptables_total",
		"Total number of iptables rules owned by kube-proxy", "table", LabelIPFamily)
	m.IPTablesRulesLastSync = gaugeVec("sync_proxy_rules_iptables_last",
		"Number of iptables rules written by kube-proxy in last sync", "table", LabelIPFamily)
	m.IPTablesRestoreFailuresTotal = counterVec("sync_proxy_rules_iptables_restore_failures_total",
		"Cumulative proxy iptables restore failures", LabelIPFamily)
	m.IPTablesPartialRestoreFailuresTotal = counterVec("sync_proxy_rules_iptables_partial_restore_failures_total",
		"Cumulative proxy iptables partial restore failures", LabelIPFamily)
}

func (m *Metrics) initHealth() {
	m.ProxyHealthzTotal = counterVec("proxy_healthz_total",
		"Cumulative proxy healthz HTTP status", "code")
	m.ProxyLivezTotal = counterVec("proxy_livez_total",
		"Cumulative proxy livez HTTP status", "code")
	// Start both codes at 0 so rate() works from the first failure on.
	for _, code := range []string{"200", "503"} {
		m.ProxyHealthzTotal.WithLabelValues(code)
		m.ProxyLivezTotal.WithLabelValues(code)
	}
}

func (m *Metrics) initConntrack() {
	m.ConntrackReconcilerSyncLatency = histogramVec("conntrack_reconciler_sync_duration_seconds",
		"ReconcileConntrackFlowsLatency latency in seconds", syncBuckets(), LabelIPFamily)
	m.ConntrackReconcilerDeletedEntriesTotal = counterVec("conntrack_reconciler_deleted_entries_total",
		"Cumulative conntrack flows deleted by conntrack reconciler", LabelIPFamily)
}

func (m *Metrics) initSwitchyard() {
	m.InvalidObjectsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: switchyardNamespace,
		Name:      "invalid_objects_total",
		Help:      "Services, EndpointSlices and endpoints skipped because they are malformed",
	}, []string{"kind", "reason"})
	m.SkippedFamilyObjectsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: switchyardNamespace,
		Name:      "skipped_family_objects_total",
		Help:      "Services and EndpointSlices skipped because this node does not program their IP family",
	}, []string{"kind", LabelIPFamily})
	m.SyncErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: switchyardNamespace,
		Name:      "sync_errors_total",
		Help:      "Failed proxy rule syncs by backend",
	}, []string{"backend"})
}
