package ipvs

import (
	"maps"
	"slices"
	"strings"

	"github.com/moby/ipvs"

	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// The service traffic counters (Backend.ServiceTraffic) are IPVS' own
// per-virtual-server stats, labelled with the service port the model says
// each virtual server belongs to.

// owner is the service port a virtual server counts for.
type owner struct {
	key   portKey
	label string // the "port" label: the port's name, or its number
}

// serverOwners gives, for each virtual server the model wants, the first
// (by name) service port that wants it.
func serverOwners(m *model) map[vsKey]owner {
	out := make(map[vsKey]owner, len(m.owners))
	for k, ports := range m.owners {
		keys := slices.SortedFunc(maps.Keys(ports), func(a, c portKey) int { return strings.Compare(a.String(), c.String()) })
		pk := keys[0]
		c := metrics.ServiceTrafficComment(pk.Name.Namespace, pk.Name.Name, pk.Name.Port, m.ports[pk].port)
		_, _, label, _ := metrics.ParseServiceTrafficComment(c)
		out[k] = owner{key: pk, label: label}
	}
	return out
}

// trafficSamples reads the stats of the kernel's virtual servers that
// have an owner.
func trafficSamples(svcs []*ipvs.Service, owners map[vsKey]owner) []metrics.ServiceTrafficSample {
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
	return out
}
