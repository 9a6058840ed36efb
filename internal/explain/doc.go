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
// internal/iptables/iptablestest over `iptables-save` output, the nftables
// tracer (ruleset.Table.Trace) over the table read back through netlink.
// In userspace mode the iptables rules are traced too, and a path they
// send to a local port is followed to the socket there: the namespace's
// socket table (/proc/thread-self/net) says whether one listens, and the
// daemon's relay table (served on its metrics address, since only the
// daemon knows where a proxy socket relays) names the endpoints, each
// with an equal, round-robin share.
//
// In ipvs mode (ReadIPVS) the companion iptables rules are traced with
// the live ipsets (`ipset save`) evaluating their set matches, up to
// filter INPUT; the IPVS table read over netlink then picks the virtual
// server (fwmark first) and its real servers with the scheduler's
// shares, and each real server's path goes on through nat POSTROUTING,
// where masquerading is decided.
//
// Every probe reports the endpoints reached with their probabilities and
// the rules each path matched; Report lists what the kernel misses or
// holds in excess.
//
// Nothing here writes to the kernel or sends traffic: the dataplanes only
// read (and, in legacy iptables mode, only save tables that already
// exist, since saving a missing one would create it).
package explain
