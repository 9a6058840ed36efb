package nfacct

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// The metrics kube-proxy's iptables mode derives from the counters.
var (
	ctStateInvalidDroppedDesc = prometheus.NewDesc("kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
		"packets dropped by iptables to work around conntrack problems", nil, nil)
	localhostNodePortsAcceptedDesc = prometheus.NewDesc("kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
		"Number of packets accepted on nodeports of loopback interface", nil, nil)
)

// Collector reads the two counters at every scrape. A counter that cannot
// be read (not created yet, or no nfnetlink_acct in the kernel) is left out
// of the scrape and logged, as in kube-proxy.
type Collector struct {
	n Interface
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector reading n.
func NewCollector(n Interface) *Collector { return &Collector{n: n} }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ctStateInvalidDroppedDesc
	ch <- localhostNodePortsAcceptedDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range []struct {
		counter string
		desc    *prometheus.Desc
	}{{CTStateInvalidDropped, ctStateInvalidDroppedDesc}, {LocalhostNodePortsAccepted, localhostNodePortsAcceptedDesc}} {
		v, err := c.n.Packets(m.counter)
		if err != nil {
			klog.V(2).ErrorS(err, "Failed to collect nfacct counter", "counter", m.counter)
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(v))
	}
}
