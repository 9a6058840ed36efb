package metrics

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
)

// bucketSet names the histogram buckets a family uses upstream.
type bucketSet int

const (
	noBuckets bucketSet = iota
	syncDurationBuckets
	programmingBuckets
)

// kubeProxyFamily is one metric family of kube-proxy v1.37
// (k8s.io/kubernetes pkg/proxy/metrics, Linux): its name, type, label
// names in upstream's order, buckets, and whether switchyard exports it.
type kubeProxyFamily struct {
	name     string
	typ      dto.MetricType
	labels   []string
	buckets  bucketSet
	exported bool
	why      string // why switchyard does not export it
}

const (
	hist  = dto.MetricType_HISTOGRAM
	gge   = dto.MetricType_GAUGE
	cntr  = dto.MetricType_COUNTER
	ipFam = LabelIPFamily
)

// kubeProxyFamilies is every family kube-proxy v1.37 can export on Linux.
var kubeProxyFamilies = []kubeProxyFamily{
	{"kubeproxy_sync_proxy_rules_duration_seconds", hist, []string{ipFam}, syncDurationBuckets, true, ""},
	{"kubeproxy_sync_full_proxy_rules_duration_seconds", hist, []string{ipFam}, syncDurationBuckets, true, ""},
	{"kubeproxy_sync_partial_proxy_rules_duration_seconds", hist, []string{ipFam}, syncDurationBuckets, true, ""},
	{"kubeproxy_network_programming_duration_seconds", hist, []string{ipFam}, programmingBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", gge, []string{ipFam}, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", gge, []string{ipFam}, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_endpoint_changes_pending", gge, nil, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_endpoint_changes_total", cntr, nil, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_service_changes_pending", gge, nil, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_service_changes_total", cntr, nil, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_no_local_endpoints_total", gge, []string{"traffic_policy", ipFam}, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_iptables_total", gge, []string{"table", ipFam}, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_iptables_last", gge, []string{"table", ipFam}, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_iptables_restore_failures_total", cntr, []string{ipFam}, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total", cntr, []string{ipFam}, noBuckets, true, ""},
	{"kubeproxy_proxy_healthz_total", cntr, []string{"code"}, noBuckets, true, ""},
	{"kubeproxy_proxy_livez_total", cntr, []string{"code"}, noBuckets, true, ""},
	{"kubeproxy_conntrack_reconciler_sync_duration_seconds", hist, []string{ipFam}, syncDurationBuckets, true, ""},
	{"kubeproxy_conntrack_reconciler_deleted_entries_total", cntr, []string{ipFam}, noBuckets, true, ""},
	{"kubeproxy_sync_proxy_rules_nftables_sync_failures_total", cntr, []string{ipFam}, noBuckets, false, "no nftables mode yet"},
	{"kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total", cntr, []string{ipFam}, noBuckets, false, "no nftables mode yet"},
	{"kubeproxy_nftables_localhost_nodeport_listeners", gge, []string{ipFam}, noBuckets, false, "no nftables mode yet"},
	{"kubeproxy_nftables_localhost_nodeport_listener_creation_failures_total", cntr, []string{ipFam}, noBuckets, false, "no nftables mode yet"},
	{"kubeproxy_nftables_localhost_nodeport_rejected_packets_total", cntr, []string{ipFam, "protocol"}, noBuckets, false, "no nftables mode yet"},
	{"kubeproxy_iptables_ct_state_invalid_dropped_packets_total", cntr, nil, noBuckets, false, "read from nfacct; switchyard's INVALID drop rule has no nfacct counter"},
	{"kubeproxy_iptables_localhost_nodeports_accepted_packets_total", cntr, nil, noBuckets, false, "read from nfacct; no nfacct counter"},
}

// useEveryMetric gives every labelled metric a series, as a dual-stack
// iptables-mode daemon has after its first syncs.
func useEveryMetric(m *Metrics) {
	m.InitFamilies(v1.IPv4Protocol, v1.IPv6Protocol)
	for _, fam := range []string{"IPv4", "IPv6"} {
		m.SyncProxyRulesLastTimestamp.WithLabelValues(fam).SetToCurrentTime()
		m.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(fam).SetToCurrentTime()
		m.IPTablesRulesTotal.WithLabelValues(TableNAT, fam).Set(1)
		m.IPTablesRulesLastSync.WithLabelValues(TableFilter, fam).Set(1)
	}
	m.InvalidObjectsTotal.WithLabelValues("Service", "bad-cluster-ip").Inc()
	m.SyncErrorsTotal.WithLabelValues("iptables").Inc()
}

// TestFamiliesAsKubeProxyExportsThem scrapes /metrics and checks every
// kubeproxy_ family against kube-proxy v1.37's definition: same name,
// type, label names and buckets, so kube-proxy dashboards and alerts read
// switchyard unchanged. Everything else must carry the switchyard_ prefix
// (or be a Go/process collector).
func TestFamiliesAsKubeProxyExportsThem(t *testing.T) {
	reg := NewRegistry()
	useEveryMetric(New(reg))
	fams := scrape(t, reg)
	upstream := map[string]kubeProxyFamily{}
	for _, k := range kubeProxyFamilies {
		upstream[k.name] = k
		f, ok := fams[k.name]
		if ok != k.exported {
			t.Errorf("%s: exported=%v, want %v %s", k.name, ok, k.exported, k.why)
		}
		if ok {
			checkFamily(t, k, f)
		}
	}
	for name := range fams {
		_, known := upstream[name]
		switch {
		case strings.HasPrefix(name, "kubeproxy_") && !known:
			t.Errorf("%s: kubeproxy_ prefix but kube-proxy has no such family", name)
		case !known && !ownPrefix(name):
			t.Errorf("%s: neither a kube-proxy family nor switchyard_/go_/process_/promhttp_", name)
		}
	}
}

func ownPrefix(name string) bool {
	for _, p := range []string{"switchyard_", "go_", "process_", "promhttp_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// checkFamily compares one scraped family with upstream's definition.
func checkFamily(t *testing.T, k kubeProxyFamily, f *dto.MetricFamily) {
	t.Helper()
	if f.GetType() != k.typ {
		t.Errorf("%s: type %v, want %v", k.name, f.GetType(), k.typ)
	}
	want := slices.Sorted(slices.Values(k.labels))
	for _, s := range f.GetMetric() {
		var got []string
		for _, lp := range s.GetLabel() {
			got = append(got, lp.GetName())
		}
		slices.Sort(got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: label names (-want +got):\n%s", k.name, d)
			return
		}
		if k.buckets != noBuckets {
			checkBuckets(t, k, s.GetHistogram())
		}
	}
}

func checkBuckets(t *testing.T, k kubeProxyFamily, h *dto.Histogram) {
	t.Helper()
	want := upstreamSyncBuckets()
	if k.buckets == programmingBuckets {
		want = upstreamProgrammingBuckets()
	}
	var got []float64
	for _, b := range h.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), +1) { // the text format adds +Inf
			got = append(got, b.GetUpperBound())
		}
	}
	if d := cmp.Diff(want, got, approxFloat); d != "" {
		t.Errorf("%s: buckets (-want +got):\n%s", k.name, d)
	}
}
