package hollow

import "testing"

func TestParseWatchTotals(t *testing.T) {
	text := `# HELP apiserver_watch_events_sizes [BETA] Watch event size distribution in bytes
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",resource="services",version="v1",le="1024"} 2
apiserver_watch_events_sizes_bucket{group="",resource="services",version="v1",le="+Inf"} 2
apiserver_watch_events_sizes_sum{group="",resource="services",version="v1"} 1500
apiserver_watch_events_sizes_count{group="",resource="services",version="v1"} 2
apiserver_watch_events_sizes_bucket{group="discovery.k8s.io",resource="endpointslices",version="v1",le="+Inf"} 3
apiserver_watch_events_sizes_sum{group="discovery.k8s.io",resource="endpointslices",version="v1"} 2500.5
apiserver_watch_events_sizes_count{group="discovery.k8s.io",resource="endpointslices",version="v1"} 3
# HELP apiserver_watch_events_total [BETA] Number of events sent in watch clients
# TYPE apiserver_watch_events_total counter
apiserver_watch_events_total{group="",resource="services",version="v1"} 2
apiserver_watch_events_total{group="discovery.k8s.io",resource="endpointslices",version="v1"} 3
`
	w, err := parseWatchTotals(text)
	if err != nil || w.bytes != 4000.5 || w.events != 5 {
		t.Errorf("got %+v, %v", w, err)
	}
	if _, err := parseWatchTotals("# TYPE x counter\nx 1\n"); err == nil {
		t.Error("no error without the sizes")
	}
	if _, err := parseWatchTotals("not metrics {"); err == nil {
		t.Error("no error on garbage")
	}
}
