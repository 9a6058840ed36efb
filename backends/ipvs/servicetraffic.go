package ipvs

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// ServiceTraffic implements metrics.ServiceTrafficSource
// (--service-traffic-metrics) from IPVS' own per-virtual-server stats,
// read now with one netlink dump: connections are those IPVS scheduled
// (new connections), packets and bytes those from clients ("in"; replies
// are "out" and not counted, as in the other modes). Every virtual server
// of a service port counts: cluster IP, external and load-balancer IPs,
// NodePorts on each node address. Which port a virtual server belongs to
// is what the last sync wrote; a virtual server of no port (gone, or not
// ours) is skipped. moby/ipvs reads the 32-bit connection and packet
// counters, which wrap at 2^32 (Prometheus sees a reset). The kernel
// folds its per-CPU counters into these stats on its rate estimator's
// round (every 2 s), so they trail the traffic by up to 2 s.
func (b *Backend) ServiceTraffic(context.Context) ([]metrics.ServiceTrafficSample, error) {
	owners := b.serverOwners()
	svcs, err := b.k.IPVS.GetServices()
	if err != nil {
		return nil, fmt.Errorf("service traffic counters: %w", err)
	}
	var out []metrics.ServiceTrafficSample
	for _, s := range svcs {
		k, ok := keyOf(s)
		o, owned := owners[k]
		if !ok || !owned {
			continue
		}
		n := o.key.Name
		out = append(out, metrics.ServiceTrafficSample{
			Namespace: n.Namespace, Service: n.Name, Port: o.label,
			Protocol: string(n.Protocol), Family: metrics.Family(o.key.Family),
			Connections: uint64(s.Stats.Connections), Packets: uint64(s.Stats.PacketsIn), Bytes: s.Stats.BytesIn,
		})
	}
	return out, nil
}

// owner is the service port a virtual server counts for.
type owner struct {
	key   portKey
	label string // the "port" label: the port's name, or its number
}

// serverOwners gives, for each virtual server the model wants, the first
// (by name) service port that wants it.
func (b *Backend) serverOwners() map[vsKey]owner {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[vsKey]owner, len(b.model.owners))
	for k, ports := range b.model.owners {
		keys := slices.SortedFunc(maps.Keys(ports), func(a, c portKey) int { return strings.Compare(a.String(), c.String()) })
		pk := keys[0]
		c := metrics.ServiceTrafficComment(pk.Name.Namespace, pk.Name.Name, pk.Name.Port, b.model.ports[pk].port)
		_, _, label, _ := metrics.ParseServiceTrafficComment(c)
		out[k] = owner{key: pk, label: label}
	}
	return out
}
