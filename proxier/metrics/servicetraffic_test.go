package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeTraffic is a source whose counts the test sets between scrapes.
type fakeTraffic struct {
	samples []ServiceTrafficSample
	err     error
	reads   int
}

func (f *fakeTraffic) ServiceTraffic(context.Context) ([]ServiceTrafficSample, error) {
	f.reads++
	return append([]ServiceTrafficSample(nil), f.samples...), f.err
}

func TestServiceTrafficCollectorReadsAtScrape(t *testing.T) {
	src := &fakeTraffic{samples: []ServiceTrafficSample{
		{Namespace: "ns", Service: "web", Port: "http", Protocol: "TCP", Family: "IPv4", Connections: 2, Packets: 10, Bytes: 600},
		// The same port's external IP: added to the cluster IP's counts.
		{Namespace: "ns", Service: "web", Port: "http", Protocol: "TCP", Family: "IPv4", Connections: 1, Packets: 5, Bytes: 300},
		{Namespace: "ns", Service: "dns", Port: "53", Protocol: "UDP", Family: "IPv6", Packets: 1, Bytes: 80},
	}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewServiceTrafficCollector(src, 0))
	want := `
# HELP switchyard_service_connections_total New connections to the Service port, counted by the data plane (--service-traffic-metrics).
# TYPE switchyard_service_connections_total counter
switchyard_service_connections_total{ip_family="IPv4",namespace="ns",port="http",protocol="TCP",service="web"} 3
switchyard_service_connections_total{ip_family="IPv6",namespace="ns",port="53",protocol="UDP",service="dns"} 0
# HELP switchyard_service_packets_total Packets sent to the Service port, counted by the data plane (--service-traffic-metrics).
# TYPE switchyard_service_packets_total counter
switchyard_service_packets_total{ip_family="IPv4",namespace="ns",port="http",protocol="TCP",service="web"} 15
switchyard_service_packets_total{ip_family="IPv6",namespace="ns",port="53",protocol="UDP",service="dns"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), ServiceConnectionsName, ServicePacketsName); err != nil {
		t.Fatal(err)
	}
	// A Service gone from the source is gone from the next scrape: the
	// collector keeps nothing.
	src.samples = src.samples[2:]
	if n, err := testutil.GatherAndCount(reg, ServiceBytesName); err != nil || n != 1 {
		t.Fatalf("series after the Service went: %d, %v; want 1", n, err)
	}
	if src.reads != 2 {
		t.Errorf("source read %d times, want once per scrape (2)", src.reads)
	}
}

func TestServiceTrafficCollectorReportsReadErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewServiceTrafficCollector(&fakeTraffic{err: errors.New("netlink: boom")}, 0))
	if _, err := reg.Gather(); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Gather error = %v, want the source's", err)
	}
}

func TestServiceTrafficComment(t *testing.T) {
	for _, tt := range []struct {
		ns, svc, name string
		port          uint16
		want          string
	}{
		{"kube-system", "kube-dns", "dns-tcp", 53, "kube-system/kube-dns:dns-tcp"},
		{"default", "web", "", 8080, "default/web:8080"},
	} {
		c := ServiceTrafficComment(tt.ns, tt.svc, tt.name, tt.port)
		if c != tt.want {
			t.Errorf("comment = %q, want %q", c, tt.want)
		}
		ns, svc, port, ok := ParseServiceTrafficComment(c)
		if !ok || ns != tt.ns || svc != tt.svc || !strings.HasSuffix(tt.want, ":"+port) {
			t.Errorf("parse(%q) = %q %q %q %v", c, ns, svc, port, ok)
		}
	}
	for _, bad := range []string{"", "ns/svc", "ns:port", "/svc:p", "ns/:p", "ns/svc:"} {
		if _, _, _, ok := ParseServiceTrafficComment(bad); ok {
			t.Errorf("parse(%q) accepted", bad)
		}
	}
}
