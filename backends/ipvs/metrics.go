package ipvs

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/reconcile"
)

// collector reads the kernel's IPVS table at scrape time: the number of
// virtual and real servers, and each real server's connection counts.
type collector struct {
	ipvs             IPVS
	virtual, real    *prometheus.Desc
	active, inactive *prometheus.Desc
}

func newCollector(h IPVS) *collector {
	labels := []string{"virtual_server", "real_server"}
	return &collector{
		ipvs:     h,
		virtual:  prometheus.NewDesc("switchyard_ipvs_virtual_servers", "Number of IPVS virtual servers in the kernel.", nil, nil),
		real:     prometheus.NewDesc("switchyard_ipvs_real_servers", "Number of IPVS real servers in the kernel, over all virtual servers.", nil, nil),
		active:   prometheus.NewDesc("switchyard_ipvs_real_server_active_connections", "Active connections of an IPVS real server.", labels, nil),
		inactive: prometheus.NewDesc("switchyard_ipvs_real_server_inactive_connections", "Inactive connections of an IPVS real server.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.virtual, c.real, c.active, c.inactive} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A kernel read error is
// reported as an invalid metric, so the scrape shows it.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	svcs, err := c.ipvs.GetServices()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.virtual, err)
		return
	}
	reals := 0
	for _, s := range svcs {
		k, ok := keyOf(s)
		if !ok {
			continue
		}
		dests, err := c.ipvs.GetDestinations(s)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.active, err)
			continue
		}
		for _, d := range dests {
			ap, ok := destKey(d)
			if !ok {
				continue
			}
			reals++
			ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(d.ActiveConnections), k.String(), ap.String())
			ch <- prometheus.MustNewConstMetric(c.inactive, prometheus.GaugeValue, float64(d.InactiveConnections), k.String(), ap.String())
		}
	}
	ch <- prometheus.MustNewConstMetric(c.virtual, prometheus.GaugeValue, float64(len(svcs)))
	ch <- prometheus.MustNewConstMetric(c.real, prometheus.GaugeValue, float64(reals))
}

// newRepairCounter counts the verifying syncs that found a kind of this
// mode's kernel state changed outside switchyard and repaired it.
// Deprecated: switchyard_rules_repaired_total{mode="ipvs"} counts the
// same; this name stays for one release for dashboards that use it.
func newRepairCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "switchyard", Subsystem: "ipvs", Name: "state_repaired_total",
		Help: "(Deprecated: use switchyard_rules_repaired_total.) Syncs that found IPVS mode kernel state changed or removed outside switchyard and restored it, " +
			"per kind (iptables, ipset, interface, virtual_server, real_server) and IP family (ipv4, ipv6).",
	}, []string{"kind", "family"})
}

// repairMetrics counts the repairs of each successful sync, per kind and
// family, in switchyard_rules_repaired_total and the deprecated
// switchyard_ipvs_state_repaired_total.
type repairMetrics struct {
	deprecated *prometheus.CounterVec
	rules      *reconcile.Repairs
}

// record counts what a verification found and the sync repaired.
func (r repairMetrics) record(d *damage) {
	if !d.any() {
		return
	}
	n := 0
	for k, found := range d.found {
		r.deprecated.WithLabelValues(k.kind, familyLabel(k.family)).Inc()
		r.rules.Record(k.kind, k.family)
		n += len(found)
	}
	klog.InfoS("Repaired IPVS mode kernel state", "kinds", len(d.found), "differences", n)
}
