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
	// Mark is the packet's fwmark as it enters the traced tables (what
	// the untraced mangle table set).
	Mark uint32
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
	Endpoint netip.AddrPort
	// Masquerade: the endpoint sees the node's address, not the
	// client's.
	Masquerade bool
	// Redirected: the rules REDIRECTed the packet to a local port.
	Redirected bool
	// Relayed: a userspace proxy socket opens the connection to
	// Endpoint.
	Relayed bool
	// Probability is the chance that a new connection takes this path.
	Probability float64
	// Rules are the rules the packet matched on this path, in order.
	Rules []string
	// Note says what happened past the rules (the userspace proxy:
	// which socket relayed the connection, or why nothing took it).
	Note string
	// AffinitySeconds is the ClientIP affinity timeout a userspace
	// proxy socket keeps on this path; 0 for none (the kernel modes'
	// affinity shows in their rules).
	AffinitySeconds int
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
