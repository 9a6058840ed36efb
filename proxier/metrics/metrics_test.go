package metrics

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
)

// scrape fetches /metrics from a real HTTP server in the text format and
// parses it.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(Handler(reg))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return fams
}

// TestNewExportsWithoutUse: right after New and InitFamilies, every
// family whose series are known up front is exported, so rate() and
// absent() alerts work before the first event; the Go and process
// collectors are there as in kube-proxy's /metrics.
func TestNewExportsWithoutUse(t *testing.T) {
	reg := NewRegistry()
	New(reg).InitFamilies(v1.IPv4Protocol)
	fams := scrape(t, reg)
	atStart := map[string]bool{
		// Set by the first sync or the first queued change, as upstream:
		// a timestamp of 0 would read as "never synced".
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":        false,
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds": false,
		// Per table, set by the iptables backend's first sync.
		"kubeproxy_sync_proxy_rules_iptables_total": false,
		"kubeproxy_sync_proxy_rules_iptables_last":  false,
	}
	for _, k := range kubeProxyFamilies {
		want, listed := atStart[k.name]
		if !listed {
			want = k.exported
		}
		if _, ok := fams[k.name]; ok != want {
			t.Errorf("right after New: %s present=%v, want %v", k.name, ok, want)
		}
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing: NewRegistry must add the Go and process collectors", name)
		}
	}
	if v := value(t, fams, "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
		map[string]string{"traffic_policy": "internal", "ip_family": "IPv4"}); v != 0 {
		t.Errorf("no-local endpoints at start = %v, want 0", v)
	}
}

// value returns the value of the series of family name whose labels are
// exactly labels (nil for an unlabelled metric).
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("%s missing from scrape", name)
	}
	for _, m := range f.GetMetric() {
		if !sameLabels(m.GetLabel(), labels) {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("%s%v not found", name, labels)
	return 0
}

func sameLabels(pairs []*dto.LabelPair, want map[string]string) bool {
	if len(pairs) != len(want) {
		return false
	}
	for _, lp := range pairs {
		if v, ok := want[lp.GetName()]; !ok || v != lp.GetValue() {
			return false
		}
	}
	return true
}

func TestObservedValuesAreScraped(t *testing.T) {
	reg := NewRegistry()
	m := New(reg)

	m.InitFamilies(v1.IPv4Protocol)
	m.SyncProxyRulesLatency.WithLabelValues("IPv4").Observe(0.003)
	m.SyncProxyRulesLatency.WithLabelValues("IPv4").Observe(0.2)
	m.SyncFullProxyRulesLatency.WithLabelValues("IPv4").Observe(0.2)
	m.SyncPartialProxyRulesLatency.WithLabelValues("IPv4").Observe(0.003)
	m.NetworkProgrammingLatency.WithLabelValues("IPv6").Observe(1.5)
	m.EndpointChangesPending.Set(4)
	m.EndpointChangesTotal.Add(7)
	m.ServiceChangesPending.Set(2)
	m.ServiceChangesTotal.Add(3)
	m.SyncProxyRulesLastTimestamp.WithLabelValues("IPv4").Set(1700000000)
	m.SyncProxyRulesLastQueuedTimestamp.WithLabelValues("IPv4").Set(1700000001)
	m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(TrafficPolicyExternal, "IPv4").Set(2)
	m.IPTablesRulesTotal.WithLabelValues(TableFilter, "IPv4").Set(11)
	m.IPTablesRulesLastSync.WithLabelValues(TableNAT, "IPv6").Set(5)
	m.IPTablesRestoreFailuresTotal.WithLabelValues("IPv4").Inc()
	m.IPTablesPartialRestoreFailuresTotal.WithLabelValues("IPv4").Add(2)
	m.ProxyHealthzTotal.WithLabelValues("503").Inc()
	m.ProxyLivezTotal.WithLabelValues("200").Add(3)
	m.ConntrackReconcilerSyncLatency.WithLabelValues("IPv4").Observe(0.01)
	m.ConntrackReconcilerDeletedEntriesTotal.WithLabelValues("IPv4").Add(9)
	m.InvalidObjectsTotal.WithLabelValues("EndpointSlice", "no-service-label").Add(2)
	m.SyncErrorsTotal.WithLabelValues("ipvs").Inc()

	fams := scrape(t, reg)
	v4 := map[string]string{"ip_family": "IPv4"}
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kubeproxy_sync_proxy_rules_duration_seconds", v4, 2},
		{"kubeproxy_sync_full_proxy_rules_duration_seconds", v4, 1},
		{"kubeproxy_sync_partial_proxy_rules_duration_seconds", v4, 1},
		{"kubeproxy_network_programming_duration_seconds", map[string]string{"ip_family": "IPv6"}, 1},
		{"kubeproxy_network_programming_duration_seconds", v4, 0},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_pending", nil, 4},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_total", nil, 7},
		{"kubeproxy_sync_proxy_rules_service_changes_pending", nil, 2},
		{"kubeproxy_sync_proxy_rules_service_changes_total", nil, 3},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", v4, 1700000000},
		{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", v4, 1700000001},
		{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", map[string]string{"traffic_policy": "external", "ip_family": "IPv4"}, 2},
		{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", map[string]string{"traffic_policy": "internal", "ip_family": "IPv4"}, 0},
		{"kubeproxy_sync_proxy_rules_iptables_total", map[string]string{"table": "filter", "ip_family": "IPv4"}, 11},
		{"kubeproxy_sync_proxy_rules_iptables_last", map[string]string{"table": "nat", "ip_family": "IPv6"}, 5},
		{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", v4, 1},
		{"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", v4, 2},
		{"kubeproxy_proxy_healthz_total", map[string]string{"code": "503"}, 1},
		{"kubeproxy_proxy_healthz_total", map[string]string{"code": "200"}, 0},
		{"kubeproxy_proxy_livez_total", map[string]string{"code": "200"}, 3},
		{"kubeproxy_conntrack_reconciler_sync_duration_seconds", v4, 1},
		{"kubeproxy_conntrack_reconciler_deleted_entries_total", v4, 9},
		{"switchyard_invalid_objects_total", map[string]string{"kind": "EndpointSlice", "reason": "no-service-label"}, 2},
		{"switchyard_sync_errors_total", map[string]string{"backend": "ipvs"}, 1},
	}
	for _, tc := range tests {
		if got := value(t, fams, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}

	sum := fams["kubeproxy_sync_proxy_rules_duration_seconds"].GetMetric()[0].GetHistogram().GetSampleSum()
	if math.Abs(sum-0.203) > 1e-9 {
		t.Errorf("sync duration sum = %v, want 0.203", sum)
	}
}

// upstreamSyncBuckets are kube-proxy's sync duration buckets, written
// out independently of syncBuckets: 1ms doubling 15 times.
func upstreamSyncBuckets() []float64 {
	var b []float64
	for v := 0.001; len(b) < 15; v *= 2 {
		b = append(b, v)
	}
	return b
}

// upstreamProgrammingBuckets are kube-proxy's network programming
// buckets: 0 (its merge helper starts with it), 0.25, 0.5, every second
// to 59, every 5 s to 115, every 30 s to 300: 81 bounds.
func upstreamProgrammingBuckets() []float64 {
	b := []float64{0, 0.25, 0.5}
	for s := 1.0; s <= 59; s++ {
		b = append(b, s)
	}
	for s := 60.0; s <= 115; s += 5 {
		b = append(b, s)
	}
	for s := 120.0; s <= 300; s += 30 {
		b = append(b, s)
	}
	return b
}

var approxFloat = cmp.Comparer(func(a, b float64) bool {
	d := a - b
	return d < 1e-12 && d > -1e-12
})

func TestProgrammingBucketCount(t *testing.T) {
	if n := len(upstreamProgrammingBuckets()); n != 81 {
		t.Errorf("network programming buckets: %d, upstream has 81", n)
	}
	if n := len(networkProgrammingBuckets()); n != 81 {
		t.Errorf("networkProgrammingBuckets: %d, upstream has 81", n)
	}
}

func TestNewWithoutRegistryAndDoubleRegistration(t *testing.T) {
	m := New(nil)
	m.SyncErrorsTotal.WithLabelValues("iptables").Inc() // usable unregistered
	m.InitFamilies(v1.IPv4Protocol)

	reg := prometheus.NewRegistry()
	New(reg)
	defer func() {
		if recover() == nil {
			t.Error("second New on the same registry did not panic")
		}
	}()
	New(reg)
}
