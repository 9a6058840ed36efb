package userspace

import (
	"context"
	"strconv"
	"sync/atomic"

	pmetrics "github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// trafficCount is one proxy socket's share of its service port's traffic
// (--service-traffic-metrics): connections accepted (TCP) or sessions
// started (UDP), datagrams from clients, and bytes from clients. A relay
// sees TCP as a byte stream, never its packets, so TCP's packet count
// stays 0 here. Connections are counted when accepted, also those then
// closed for want of an endpoint, as the kernel modes count them.
type trafficCount struct {
	port                uint16 // the service port's number: an unnamed port's label
	conns, pkts, octets atomic.Uint64
}

// ServiceTraffic implements pmetrics.ServiceTrafficSource: each open proxy
// socket's counts (the collector adds up a port's internal and external
// sockets). A service port's counts go with its sockets.
func (b *Backend) ServiceTraffic(context.Context) ([]pmetrics.ServiceTrafficSample, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]pmetrics.ServiceTrafficSample, 0, len(b.sockets))
	for key, s := range b.sockets {
		c := s.counts()
		port := key.name.Port
		if port == "" {
			port = strconv.Itoa(int(c.port))
		}
		out = append(out, pmetrics.ServiceTrafficSample{
			Namespace: key.name.Namespace, Service: key.name.Name, Port: port,
			Protocol: string(key.name.Protocol), Family: string(key.family),
			Connections: c.conns.Load(), Packets: c.pkts.Load(), Bytes: c.octets.Load(),
		})
	}
	return out, nil
}
