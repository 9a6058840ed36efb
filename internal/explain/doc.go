// Package explain answers an operator's "why does my Service not answer
// on this node?" from the node itself (`switchyard explain`).
//
// It compares two views of one Service. The expected view is built from
// the API objects (the Service, its EndpointSlices, the Node) with the
// daemon's own pipeline: the proxier's trackers convert them into a State
// and proxier.SelectEndpoints picks the endpoints each kind of traffic may
// reach. The kernel view is what the node's live ruleset does with a new
// connection to each of the Service's addresses, found by running the
// project's packet tracers over it (a Dataplane): the iptables tracer of
// internal/iptables/testing over `iptables-save` output, the nftables
// tracer (ruleset.Table.Trace) over the table read back through netlink.
// Every probe reports the endpoints reached with their probabilities and
// the rules each path matched; Report lists what the kernel misses or
// holds in excess.
//
// Nothing here writes to the kernel: the dataplanes only read (and, in
// legacy iptables mode, only save tables that already exist, since
// saving a missing one would create it).
package explain
