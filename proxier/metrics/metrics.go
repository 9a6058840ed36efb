package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

const (
	// kubeProxySubsystem is upstream's subsystem; with no namespace set the
	// names come out as "kubeproxy_<name>".
	kubeProxySubsystem = "kubeproxy"
	// switchyardNamespace prefixes the metrics kube-proxy does not have.
	switchyardNamespace = "switchyard"
)

// Label values used by the labelled metrics.
const (
	// TrafficPolicyInternal and TrafficPolicyExternal are the values of the
	// traffic_policy label of SyncProxyRulesNoLocalEndpointsTotal.
	TrafficPolicyInternal = "internal"
	TrafficPolicyExternal = "external"

	// TableFilter and TableNAT are the values of the table label of the
	// iptables rule-count gauges.
	TableFilter = "filter"
	TableNAT    = "nat"

	// LabelIPFamily is kube-proxy's (v1.37) label for the IP family a
	// series is about; its values are v1.IPFamily strings ("IPv4",
	// "IPv6"). Use Family to make one.
	LabelIPFamily = "ip_family"
)

// Metrics holds every metric switchyard exports. Build it with New; the
// zero value is not usable. All fields are safe for concurrent use.
type Metrics struct {
	// SyncProxyRulesLatency is the duration of every sync, full or partial
	// (kubeproxy_sync_proxy_rules_duration_seconds).
	// Like every sync and conntrack metric below, it is labelled by
	// LabelIPFamily as kube-proxy v1.37 labels it.
	SyncProxyRulesLatency *prometheus.HistogramVec
	// SyncFullProxyRulesLatency is the duration of full syncs only.
	SyncFullProxyRulesLatency *prometheus.HistogramVec
	// SyncPartialProxyRulesLatency is the duration of partial syncs only.
	SyncPartialProxyRulesLatency *prometheus.HistogramVec
	// NetworkProgrammingLatency is, per endpoint change in a successful
	// sync, the time from the EndpointSlice's last-change-trigger-time
	// annotation to the end of the sync (the network programming latency
	// SLI of sig-scalability).
	NetworkProgrammingLatency *prometheus.HistogramVec

	// EndpointChangesPending and ServiceChangesPending are the changes
	// tracked but not yet synced; the *Total counters count every change
	// the trackers accepted.
	EndpointChangesPending prometheus.Gauge
	EndpointChangesTotal   prometheus.Counter
	ServiceChangesPending  prometheus.Gauge
	ServiceChangesTotal    prometheus.Counter

	// SyncProxyRulesLastTimestamp is the Unix time of the last successful
	// sync; SyncProxyRulesLastQueuedTimestamp the Unix time a sync was last
	// requested. A queued time far ahead of the last sync means a hang.
	SyncProxyRulesLastTimestamp       *prometheus.GaugeVec
	SyncProxyRulesLastQueuedTimestamp *prometheus.GaugeVec

	// SyncProxyRulesNoLocalEndpointsTotal counts services with a Local
	// traffic policy and no local endpoints, by traffic_policy
	// (TrafficPolicyInternal, TrafficPolicyExternal) and ip_family. It is a gauge, as
	// upstream: set it after each sync.
	SyncProxyRulesNoLocalEndpointsTotal *prometheus.GaugeVec

	// IPTablesRulesTotal is the number of rules switchyard owns per table
	// (TableFilter, TableNAT) and ip_family; IPTablesRulesLastSync the
	// number written by the last sync.
	IPTablesRulesTotal    *prometheus.GaugeVec
	IPTablesRulesLastSync *prometheus.GaugeVec
	// IPTablesRestoreFailuresTotal counts failed iptables-restore runs;
	// IPTablesPartialRestoreFailuresTotal those of partial restores (which
	// then fall back to a full one).
	IPTablesRestoreFailuresTotal        *prometheus.CounterVec
	IPTablesPartialRestoreFailuresTotal *prometheus.CounterVec

	// ProxyHealthzTotal and ProxyLivezTotal count /healthz and /livez
	// answers by HTTP status code ("200", "503").
	ProxyHealthzTotal *prometheus.CounterVec
	ProxyLivezTotal   *prometheus.CounterVec

	// ConntrackReconcilerSyncLatency is the duration of one conntrack
	// cleanup pass; ConntrackReconcilerDeletedEntriesTotal counts the flows
	// it deleted.
	ConntrackReconcilerSyncLatency         *prometheus.HistogramVec
	ConntrackReconcilerDeletedEntriesTotal *prometheus.CounterVec

	// InvalidObjectsTotal counts Services, EndpointSlices and endpoints
	// skipped as malformed, by kind and reason
	// (switchyard_invalid_objects_total).
	InvalidObjectsTotal *prometheus.CounterVec
	// SkippedFamilyObjectsTotal counts Services and EndpointSlices skipped
	// because the node does not program their IP family, by kind and
	// family (switchyard_skipped_family_objects_total).
	SkippedFamilyObjectsTotal *prometheus.CounterVec
	// SyncErrorsTotal counts failed backend syncs, by backend name
	// (switchyard_sync_errors_total).
	SyncErrorsTotal *prometheus.CounterVec
}

// New builds all metrics and registers them on reg. A nil reg registers
// nothing (the metrics still work, for callers that do not export them).
// Registering twice on one registry is a programming error and panics.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{}
	m.initSync()
	m.initChanges()
	m.initIPTables()
	m.initHealth()
	m.initConntrack()
	m.initSwitchyard()
	if reg != nil {
		reg.MustRegister(m.collectors()...)
	}
	return m
}

// collectors lists every metric of m, for registration.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.SyncProxyRulesLatency,
		m.SyncFullProxyRulesLatency,
		m.SyncPartialProxyRulesLatency,
		m.NetworkProgrammingLatency,
		m.EndpointChangesPending,
		m.EndpointChangesTotal,
		m.ServiceChangesPending,
		m.ServiceChangesTotal,
		m.SyncProxyRulesLastTimestamp,
		m.SyncProxyRulesLastQueuedTimestamp,
		m.SyncProxyRulesNoLocalEndpointsTotal,
		m.IPTablesRulesTotal,
		m.IPTablesRulesLastSync,
		m.IPTablesRestoreFailuresTotal,
		m.IPTablesPartialRestoreFailuresTotal,
		m.ProxyHealthzTotal,
		m.ProxyLivezTotal,
		m.ConntrackReconcilerSyncLatency,
		m.ConntrackReconcilerDeletedEntriesTotal,
		m.InvalidObjectsTotal,
		m.SkippedFamilyObjectsTotal,
		m.SyncErrorsTotal,
	}
}
