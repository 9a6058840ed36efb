// Package conntrack deletes stale UDP and SCTP conntrack entries after a
// sync.
//
// The kernel NATs a flow once, on its first packet, and remembers the
// translation in the conntrack entry. A UDP client that keeps sending from
// the same source port (a DNS resolver, a syslog or statsd sender) never
// starts a new flow, so after its endpoint goes away its packets keep going
// to the dead address until the entry expires, which it never does while
// traffic flows. TCP does not need this: the dead endpoint answers with a
// reset, or the connection times out, and the client reconnects.
//
// Reconciler is a proxier.PostSyncHook. After a sync that could have made
// entries stale it walks the conntrack table of each configured IP family
// once and deletes every UDP or SCTP entry whose original destination is a
// service address (cluster IP, external IP or load-balancer IP with the
// service port, or a node address with the NodePort) and whose reply source
// (the endpoint it was DNATed to) is not an endpoint that traffic may reach
// now (proxier.SelectEndpoints, AllReachable). Entries for service
// addresses that no longer exist are deleted too. An entry that was never
// NATed (its reply source is the service address itself) is kept while the
// service has no endpoints and deleted once it has some. Such entries come
// from packets that found no rule at all, e.g. before the first sync or
// while rules were being replaced non-atomically; a packet REJECTed in the
// filter table leaves no entry (it is never confirmed; the kernel test
// shows both). Entries that are not service traffic, and all TCP entries,
// are never touched.
//
// The decision is made inside the delete filter, on a dump streamed a
// datagram at a time (internal/ctnetlink), and stale entries are deleted
// many to a sendmsg while it goes on: a pass holds no more of the table
// than one datagram, whatever its size (Table). The kernel narrows the
// dump (Scoped, scope.go): after a full sync or a failed pass it sends
// every UDP/SCTP entry (a wide pass); after a partial sync, when that is
// cheaper, only the entries of the service addresses the Diff names (a
// targeted pass, one dump and so one walk of the kernel's table per
// address, spread over up to four CPUs). Nothing is scanned unless the
// sync's Diff says something relevant changed (an endpoint went away, a
// UDP/SCTP port was deleted, gained its first endpoints, or changed its
// addresses, or the sync was full) and there is UDP/SCTP service traffic
// to look at. A failed pass is retried, wide, after the next sync. A
// targeted pass leaves stale entries of addresses the Diff does not name
// (there are none unless something other than the Diff made them) to
// the next wide pass.
//
// SCTP is matched by address and port, like UDP and as kube-proxy does:
// netlink v1.3.1 parses ports of TCP and UDP entries only (and reads a
// whole dump into memory), so NetlinkTable dumps and parses the table
// itself (dump.go).
//
// In userspace mode there are no NAT entries for services: the proxy
// itself receives the client's packets on the service address and opens
// its own flows to the endpoints, and the userspace backend resets its own
// sessions when endpoints go away. The reconciler may run there and is
// harmless: the entries it can match were never NATed (reply source ==
// original destination), so deleting one only makes the kernel create an
// identical entry on the next packet. This relies on the userspace backend
// not REDIRECTing service traffic: deleting a REDIRECT entry while the
// proxy answers could make the proxy's reply claim the tuple the client's
// next packet needs. Do not install the reconciler with such a backend.
//
// VanishedReaper (vanished.go) is an opt-in second hook for TCP: once an
// endpoint address has been out of every EndpointSlice for a grace
// period, it deletes the entries of TCP flows NATed from a service
// address to it, so that clients stuck on a dead endpoint get a reset at
// their next packet, and tells the backend (ConnectionEnder: the
// userspace proxy and the localhost NodePort relay abort their
// connections, ipvs deletes the draining real servers) to end theirs. It runs on its own
// timer and its own netlink socket.
//
// Tune applies kube-proxy's conntrack settings once at start (the
// --conntrack-* flags, the configuration file's conntrack section):
// nf_conntrack_max and the hash size, the TCP established and close-wait
// timeouts, tcp_be_liberal and the UDP timeouts (tuning.go).
package conntrack
