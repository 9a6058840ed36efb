package userspace

import "sync/atomic"

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
