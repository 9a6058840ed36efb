package metrics

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// Per-Service traffic counters (--service-traffic-metrics). The kernel
// (or the userspace relay) counts; a ServiceTrafficCollector reads the
// counts at every scrape and keeps nothing between scrapes, so a series
// goes with the Service whose counters went.
const (
	ServiceConnectionsName = "switchyard_service_connections_total"
	ServicePacketsName     = "switchyard_service_packets_total"
	ServiceBytesName       = "switchyard_service_bytes_total"
)

// serviceTrafficLabels: "port" is the Service port's name, or its number
// when the port is unnamed (a single-port Service).
var serviceTrafficLabels = []string{"namespace", "service", "port", "protocol", LabelIPFamily}

// ServiceTrafficSample is what a backend counted for one service port in
// one IP family. Several samples with the same labels (a cluster IP and an
// external IP of one port, say) are added up.
type ServiceTrafficSample struct {
	Namespace, Service, Port string
	// Protocol is "TCP", "UDP" or "SCTP"; Family "IPv4" or "IPv6".
	Protocol, Family string
	// Connections are new connections (the first packet of a flow).
	Connections uint64
	// Packets and Bytes are what the backend counts as a Service's
	// traffic; each backend's doc says which direction.
	Packets, Bytes uint64
}

// ServiceTrafficSource reads the current counts. It is called from the
// scrape, concurrently with syncs.
type ServiceTrafficSource interface {
	ServiceTraffic(ctx context.Context) ([]ServiceTrafficSample, error)
}

// ServiceTrafficCollector exports a ServiceTrafficSource's counts.
type ServiceTrafficCollector struct {
	src         ServiceTrafficSource
	timeout     time.Duration
	conns, pkts *prometheus.Desc
	bytes       *prometheus.Desc
}

// NewServiceTrafficCollector returns a collector reading src at every
// scrape, giving up after timeout (0: 10 s).
func NewServiceTrafficCollector(src ServiceTrafficSource, timeout time.Duration) *ServiceTrafficCollector {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, serviceTrafficLabels, nil)
	}
	return &ServiceTrafficCollector{
		src: src, timeout: timeout,
		conns: d(ServiceConnectionsName, "New connections to the Service port, counted by the data plane (--service-traffic-metrics)."),
		pkts:  d(ServicePacketsName, "Packets sent to the Service port, counted by the data plane (--service-traffic-metrics)."),
		bytes: d(ServiceBytesName, "Bytes sent to the Service port, counted by the data plane (--service-traffic-metrics)."),
	}
}

// Describe implements prometheus.Collector.
func (c *ServiceTrafficCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.conns
	ch <- c.pkts
	ch <- c.bytes
}

// Collect implements prometheus.Collector: one read of the source, samples
// of the same labels added up. A failed read is reported as an invalid
// metric (the scrape's other metrics are still served).
func (c *ServiceTrafficCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	samples, err := c.src.ServiceTraffic(ctx)
	if err != nil {
		klog.V(2).InfoS("Reading service traffic counters failed", "err", err)
		ch <- prometheus.NewInvalidMetric(c.conns, err)
		return
	}
	for _, s := range SumServiceTraffic(samples) {
		lv := []string{s.Namespace, s.Service, s.Port, s.Protocol, s.Family}
		ch <- prometheus.MustNewConstMetric(c.conns, prometheus.CounterValue, float64(s.Connections), lv...)
		ch <- prometheus.MustNewConstMetric(c.pkts, prometheus.CounterValue, float64(s.Packets), lv...)
		ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(s.Bytes), lv...)
	}
}

// SumServiceTraffic adds up the samples with the same labels, keeping the
// order of their first appearance.
func SumServiceTraffic(samples []ServiceTrafficSample) []ServiceTrafficSample {
	type key struct{ ns, svc, port, proto, fam string }
	at := make(map[key]int, len(samples))
	out := make([]ServiceTrafficSample, 0, len(samples))
	for _, s := range samples {
		k := key{s.Namespace, s.Service, s.Port, s.Protocol, s.Family}
		i, ok := at[k]
		if !ok {
			at[k] = len(out)
			out = append(out, s)
			continue
		}
		out[i].Connections += s.Connections
		out[i].Packets += s.Packets
		out[i].Bytes += s.Bytes
	}
	return out
}

// ServiceTrafficComment is how the kernel modes name a counter's service
// port next to it (an nftables element comment, an ipset member comment):
// "namespace/service:port", port being the port's name or, unnamed, its
// number. Neither a namespace nor a Service name holds '/' or ':'.
func ServiceTrafficComment(namespace, service, portName string, port uint16) string {
	if portName == "" {
		portName = strconv.Itoa(int(port))
	}
	return namespace + "/" + service + ":" + portName
}

// ParseServiceTrafficComment splits a ServiceTrafficComment; false for
// anything else.
func ParseServiceTrafficComment(c string) (namespace, service, port string, ok bool) {
	namespace, rest, ok1 := strings.Cut(c, "/")
	service, port, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || namespace == "" || service == "" || port == "" {
		return "", "", "", false
	}
	return namespace, service, port, true
}
