package explain

import (
	"net/netip"

	v1 "k8s.io/api/core/v1"
)

// Probe is the first packet of a new connection to trace.
type Probe struct {
	Src, Dst netip.Addr
	Port     uint16
	Protocol v1.Protocol
	// FromNode: the node itself opens the connection (the output path);
	// otherwise the packet arrives on InInterface (the prerouting path).
	FromNode    bool
	InInterface string
	// Returning: the client is one the kernel has seen before (session
	// affinity state may hold it); by default it is new.
	Returning bool
}

// Path is one possible fate of the traced packet.
type Path struct {
	// Verdict is "accept", "drop" or "reject".
	Verdict string
	// Endpoint is where the destination was rewritten to; invalid when
	// it was not.
	Endpoint   netip.AddrPort
	Masquerade bool
	// Probability is the chance that a new connection takes this path.
	Probability float64
	// Rules are the rules the packet matched on this path, in order.
	Rules []string
}

// Dataplane is the live ruleset of one mode, read once, with its tracer.
type Dataplane interface {
	// Mode is the proxy mode whose ruleset this is.
	Mode() string
	// LocalAddrs are the node's addresses, as the tracer takes them.
	LocalAddrs() []netip.Addr
	// Trace follows a probe through the ruleset.
	Trace(p Probe) ([]Path, error)
}
