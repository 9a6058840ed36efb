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

// expected lists every metric New defines, with its type and whether it
// is exported before anything is observed (labelled metrics whose label
// values are not known up front appear on first use).
var expected = []struct {
	name    string
	typ     dto.MetricType
	atStart bool
}{
	{"kubeproxy_sync_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, true},
	{"kubeproxy_sync_full_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, true},
	{"kubeproxy_sync_partial_proxy_rules_duration_seconds", dto.MetricType_HISTOGRAM, true},
	{"kubeproxy_network_programming_duration_seconds", dto.MetricType_HISTOGRAM, true},
	{"kubeproxy_sync_proxy_rules_endpoint_changes_pending", dto.MetricType_GAUGE, true},
	{"kubeproxy_sync_proxy_rules_endpoint_changes_total", dto.MetricType_COUNTER, true},
	{"kubeproxy_sync_proxy_rules_service_changes_pending", dto.MetricType_GAUGE, true},
	{"kubeproxy_sync_proxy_rules_service_changes_total", dto.MetricType_COUNTER, true},
	{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", dto.MetricType_GAUGE, true},
	{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", dto.MetricType_GAUGE, true},
	{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", dto.MetricType_GAUGE, true},
	{"kubeproxy_sync_proxy_rules_iptables_total", dto.MetricType_GAUGE, false},
	{"kubeproxy_sync_proxy_rules_iptables_last", dto.MetricType_GAUGE, false},
	{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", dto.MetricType_COUNTER, true},
	{"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", dto.MetricType_COUNTER, true},
	{"kubeproxy_proxy_healthz_total", dto.MetricType_COUNTER, true},
	{"kubeproxy_proxy_livez_total", dto.MetricType_COUNTER, true},
	{"kubeproxy_conntrack_reconciler_deleted_entries_total", dto.MetricType_COUNTER, true},
	{"kubeproxy_conntrack_reconciler_sync_duration_seconds", dto.MetricType_HISTOGRAM, true},
	{"switchyard_invalid_objects_total", dto.MetricType_COUNTER, false},
	{"switchyard_sync_errors_total", dto.MetricType_COUNTER, false},
}

func TestNewExportsEveryMetric(t *testing.T) {
	reg := NewRegistry()
	m := New(reg)

	fams := scrape(t, reg)
	for _, e := range expected {
		f, ok := fams[e.name]
		if ok != e.atStart {
			t.Errorf("right after New: %s present=%v, want %v", e.name, ok, e.atStart)
			continue
		}
		if ok && f.GetType() != e.typ {
			t.Errorf("%s: type %v, want %v", e.name, f.GetType(), e.typ)
		}
	}
	for _, name := range []string{"go_goroutines", "process_start_time_seconds"} {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s missing: NewRegistry must add the Go and process collectors", name)
		}
	}

	m.IPTablesRulesTotal.WithLabelValues(TableNAT).Set(1)
	m.IPTablesRulesLastSync.WithLabelValues(TableNAT).Set(1)
	m.InvalidObjectsTotal.WithLabelValues("Service", "bad-cluster-ip").Inc()
	m.SyncErrorsTotal.WithLabelValues("iptables").Inc()
	fams = scrape(t, reg)
	for _, e := range expected {
		f, ok := fams[e.name]
		if !ok {
			t.Errorf("after use: %s missing", e.name)
			continue
		}
		if f.GetType() != e.typ {
			t.Errorf("%s: type %v, want %v", e.name, f.GetType(), e.typ)
		}
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

	m.SyncProxyRulesLatency.Observe(0.003)
	m.SyncProxyRulesLatency.Observe(0.2)
	m.SyncFullProxyRulesLatency.Observe(0.2)
	m.SyncPartialProxyRulesLatency.Observe(0.003)
	m.NetworkProgrammingLatency.Observe(1.5)
	m.EndpointChangesPending.Set(4)
	m.EndpointChangesTotal.Add(7)
	m.ServiceChangesPending.Set(2)
	m.ServiceChangesTotal.Add(3)
	m.SyncProxyRulesLastTimestamp.Set(1700000000)
	m.SyncProxyRulesLastQueuedTimestamp.Set(1700000001)
	m.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(TrafficPolicyExternal).Set(2)
	m.IPTablesRulesTotal.WithLabelValues(TableFilter).Set(11)
	m.IPTablesRulesLastSync.WithLabelValues(TableNAT).Set(5)
	m.IPTablesRestoreFailuresTotal.Inc()
	m.IPTablesPartialRestoreFailuresTotal.Add(2)
	m.ProxyHealthzTotal.WithLabelValues("503").Inc()
	m.ProxyLivezTotal.WithLabelValues("200").Add(3)
	m.ConntrackReconcilerSyncLatency.Observe(0.01)
	m.ConntrackReconcilerDeletedEntriesTotal.Add(9)
	m.InvalidObjectsTotal.WithLabelValues("EndpointSlice", "no-service-label").Add(2)
	m.SyncErrorsTotal.WithLabelValues("ipvs").Inc()

	fams := scrape(t, reg)
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"kubeproxy_sync_proxy_rules_duration_seconds", nil, 2},
		{"kubeproxy_sync_full_proxy_rules_duration_seconds", nil, 1},
		{"kubeproxy_sync_partial_proxy_rules_duration_seconds", nil, 1},
		{"kubeproxy_network_programming_duration_seconds", nil, 1},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_pending", nil, 4},
		{"kubeproxy_sync_proxy_rules_endpoint_changes_total", nil, 7},
		{"kubeproxy_sync_proxy_rules_service_changes_pending", nil, 2},
		{"kubeproxy_sync_proxy_rules_service_changes_total", nil, 3},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", nil, 1700000000},
		{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", nil, 1700000001},
		{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", map[string]string{"traffic_policy": "external"}, 2},
		{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", map[string]string{"traffic_policy": "internal"}, 0},
		{"kubeproxy_sync_proxy_rules_iptables_total", map[string]string{"table": "filter"}, 11},
		{"kubeproxy_sync_proxy_rules_iptables_last", map[string]string{"table": "nat"}, 5},
		{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", nil, 1},
		{"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", nil, 2},
		{"kubeproxy_proxy_healthz_total", map[string]string{"code": "503"}, 1},
		{"kubeproxy_proxy_healthz_total", map[string]string{"code": "200"}, 0},
		{"kubeproxy_proxy_livez_total", map[string]string{"code": "200"}, 3},
		{"kubeproxy_conntrack_reconciler_sync_duration_seconds", nil, 1},
		{"kubeproxy_conntrack_reconciler_deleted_entries_total", nil, 9},
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

// upperBounds returns the bucket bounds of a scraped histogram family.
func upperBounds(t *testing.T, fams map[string]*dto.MetricFamily, name string) []float64 {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("%s missing", name)
	}
	var b []float64
	for _, bucket := range f.GetMetric()[0].GetHistogram().GetBucket() {
		if !math.IsInf(bucket.GetUpperBound(), +1) { // the text format adds +Inf
			b = append(b, bucket.GetUpperBound())
		}
	}
	return b
}

func TestHistogramBucketsMatchUpstream(t *testing.T) {
	reg := NewRegistry()
	New(reg)
	fams := scrape(t, reg)

	var exp []float64
	for v := 0.001; len(exp) < 15; v *= 2 {
		exp = append(exp, v)
	}
	np := []float64{0, 0.25, 0.5}
	for s := 1.0; s <= 59; s++ {
		np = append(np, s)
	}
	for s := 60.0; s <= 115; s += 5 {
		np = append(np, s)
	}
	for s := 120.0; s <= 300; s += 30 {
		np = append(np, s)
	}

	tests := []struct {
		name string
		want []float64
	}{
		{"kubeproxy_sync_proxy_rules_duration_seconds", exp},
		{"kubeproxy_sync_full_proxy_rules_duration_seconds", exp},
		{"kubeproxy_sync_partial_proxy_rules_duration_seconds", exp},
		{"kubeproxy_conntrack_reconciler_sync_duration_seconds", exp},
		{"kubeproxy_network_programming_duration_seconds", np},
	}
	approx := cmp.Comparer(func(a, b float64) bool {
		d := a - b
		return d < 1e-12 && d > -1e-12
	})
	for _, tc := range tests {
		got := upperBounds(t, fams, tc.name)
		if diff := cmp.Diff(tc.want, got, approx); diff != "" {
			t.Errorf("%s buckets (-want +got):\n%s", tc.name, diff)
		}
	}
	if n := len(np); n != 81 {
		t.Errorf("network programming buckets: built %d, upstream has 81", n)
	}
}

func TestNewWithoutRegistryAndDoubleRegistration(t *testing.T) {
	m := New(nil)
	m.SyncErrorsTotal.WithLabelValues("iptables").Inc() // usable unregistered

	reg := prometheus.NewRegistry()
	New(reg)
	defer func() {
		if recover() == nil {
			t.Error("second New on the same registry did not panic")
		}
	}()
	New(reg)
}
