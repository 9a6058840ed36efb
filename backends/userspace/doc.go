// Package userspace is switchyard's userspace proxy mode
// (--proxy-mode=userspace): the daemon itself accepts service traffic on
// proxy sockets and relays it to the endpoints, round-robin, with the same
// endpoint semantics as the iptables and IPVS modes
// (proxier.SelectEndpoints: readiness, terminating fallback, topology,
// internal and external traffic policies).
//
// # Sockets
//
// Every TCP or UDP service port gets one proxy socket per IP family, on an
// ephemeral port of Config.ListenIP (default 0.0.0.0 / ::). When the
// service's internal and external traffic policies differ, external
// traffic may be allowed to reach fewer endpoints than cluster-IP traffic,
// so the port gets a second socket for external traffic. Which sockets
// exist depends only on the services, never on endpoints: an endpoint
// change swaps the socket's balancer state and leaves the listener alone.
// SCTP ports are not proxied: Go's net package has no SCTP sockets (and
// upstream's userspace proxier never proxied SCTP). They get no socket and
// no rule; each SCTP service port is logged once, when a sync first sees
// it (ns/name:port), the first sync that has any logs a warning about the
// mode's limit, and switchyard_userspace_skipped_service_ports{protocol}
// (a gauge: what the last sync skipped) counts them (skipped.go).
//
// # Rules
//
// One iptables-restore transaction per family and sync (only when the
// rules changed, or on a full sync) rewrites the chains the old kube-proxy
// userspace mode used, plus one filter chain:
//
//	nat KUBE-PORTALS-CONTAINER  (from PREROUTING)  cluster, external and
//	                                               load-balancer IPs
//	nat KUBE-PORTALS-HOST       (from OUTPUT)      the same, node-originated
//	nat KUBE-NODEPORT-CONTAINER (from PREROUTING, dst-type LOCAL) NodePorts
//	nat KUBE-NODEPORT-HOST      (from OUTPUT, dst-type LOCAL)     NodePorts
//	filter KUBE-PORTALS-FILTER  (from INPUT, FORWARD, OUTPUT; ctstate NEW)
//
// Traffic arriving from outside the node is sent to the proxy socket with
// REDIRECT --to-ports (DNAT to ListenIP when one is set); traffic the node
// originates is DNATed to the node's address (or ListenIP) and proxy port.
// The jumps from the built-in chains are added with EnsureRule on full
// syncs.
//
// A sync whose rules are unchanged writes nothing, so the periodic sync
// (Diff.Verify), and any sync once Config.VerifyInterval has passed since
// the last check, lists these five chains and the five built-in chains
// holding the jumps and compares them with what was written (rule counts,
// jump targets). A flushed table (`iptables -t nat -F`, `iptables -F`), a
// deleted chain (`-X`) or a deleted jump turns that family's sync into a
// full one, logged with what was found and counted in
// switchyard_rules_repaired_total{mode="userspace",kind,ip_family} (and the
// deprecated switchyard_userspace_rules_repaired_total{family}); the
// cadence is internal/reconcile's, shared by every mode. Proxy sockets stay
// open throughout; established connections keep their conntrack NAT.
//
// # NodePorts
//
// With Config.NodePortAddresses (--nodeport-addresses, "primary" resolved
// by the daemon) the NodePort rules, nat and filter, carry "-d PREFIX" per
// prefix of the family, besides addrtype LOCAL, as in iptables mode; a
// family without prefixes of its own, or with a /0, serves NodePorts on
// every local address. Config.PortReserver (HostPortReserver in the
// daemon) holds every TCP and UDP NodePort on the addresses it is served
// on, as upstream's port holders did, with a socket bound without
// SO_REUSEADDR and never listening, so no local process can bind the
// port there and stray SYNs get a reset (nodeports.go). A port already
// taken is logged when first found so, retried every sync, and counted in
// switchyard_userspace_nodeports_unreserved{protocol}; it never fails the
// sync. Holders close with their NodePort and on Close.
//
// Kubernetes semantics of the rules:
//   - Cluster IPs reach the endpoints selected for internal traffic.
//   - NodePorts, external IPs and load-balancer IPs reach the external
//     selection. With externalTrafficPolicy Local, traffic to them from the
//     node itself, and from pods (Config.LocalDetector, kube-proxy's
//     --detect-local-mode: "-s CIDR", "-i br0" or "-i cali+"), is treated
//     as cluster traffic, as kube-proxy does. A source-CIDR match is
//     narrowed to this node's pod CIDR when the node has one (a pod of
//     another node is external traffic here); without a detector nothing
//     is short-circuited.
//   - loadBalancerSourceRanges: load-balancer IP traffic from other
//     sources is dropped.
//   - No usable endpoint: new connections are REJECTed by a filter rule
//     (TCP clients see "connection refused" at once, UDP clients an ICMP
//     port unreachable), not left hanging. A Local policy with endpoints
//     only on other nodes DROPs instead, as kube-proxy does, so load
//     balancers' health checks move traffic elsewhere. If a connection
//     reaches a proxy socket while its balancer is empty (between an
//     endpoint change and the rules catching up) the proxy closes it at
//     once with a reset.
//
// # Restarts
//
// Proxy sockets die with the process, so REDIRECT alone refuses new
// connections while the daemon is down. By default Close (SIGTERM) first
// rewrites the rules so that the kernel DNATs every service address
// straight to its endpoints, the fallback rules below for all traffic
// (handoff.go), and a SIGKILL leaves the REDIRECT rules to closed ports
// until the next daemon's first sync. With
// Config.RestartFallback (--userspace-restart-fallback) each service
// address with a usable endpoint (cluster, external, load-balancer IP;
// NodePorts on the wildcard address) has a sentinel: a transparent socket
// (IP_TRANSPARENT) the daemon holds but never serves. A listening
// sentinel holds its port on the node: a host process's wildcard bind of
// the same port fails (EADDRINUSE), which is why it is opt-in. mangle
// KUBE-PORTALS-MARK (from PREROUTING) sets Config.MarkBit (0x1000) on
// packets that `-m socket --transparent` matches (NodePorts:
// `--nowildcard`, dst-type LOCAL); the container portal rules REDIRECT
// only marked packets and DNAT the others straight to the endpoints (at
// random, as the iptables mode; masqueraded through nat KUBE-PORTALS-MASQ
// with Config.MasqueradeBit, except eTP=Local external traffic). The
// kernel closes the sentinels with the process, so the fallback serves
// at once; a new daemon opens its sentinels only after writing rules for
// its new proxy ports. Later, a new UDP service's sentinel opens before
// the rules that REDIRECT to it (only this daemon's rules are in the
// kernel then, so a datagram marked early is dropped by the sentinel, not
// misrouted), so no datagram takes the fallback, which has no session
// affinity, in between (sentinel.go, sentinelSet.early). Flows the fallback DNATed are never marked
// (`--ctstate DNAT` RETURN), so they stay on their endpoint. Close
// (SIGTERM) closes the sentinels first and lets relayed connections
// finish (Config.ShutdownGrace). Measured (e2e, a new connection every
// 50 ms): 0 of 100 failed across SIGKILL + restart and across SIGTERM +
// restart (3 of 101 each before). During the gap there is no session
// affinity, and connections being relayed at a SIGKILL are reset.
// Node-originated traffic (nat OUTPUT: xt_socket only works in
// PREROUTING/INPUT) is still DNATed to the proxy port: host clients are
// refused from the stop until the new daemon's first sync.
// Endpoint changes rewrite the rules (the fallback names endpoints).
//
// A removed endpoint's TCP connections drain; EndConnectionsTo aborts
// those to endpoints that vanished (--reset-vanished-endpoint-connections,
// conntrack.VanishedReaper; vanished.go).
//
// # Client addresses
//
// The proxy connects to endpoints from the node (every flow is, in
// effect, masqueraded), except with Config.Transparent
// (--userspace-transparent, default on): the socket serving external
// traffic of a service with externalTrafficPolicy Local connects to local
// endpoints from the client's address (IP_TRANSPARENT, port 0), so they
// see the client as in the kernel modes. The endpoint's replies to that
// address reach this node (its default gateway), match the transparent
// socket in KUBE-PORTALS-MARK, and policy routing (`ip rule fwmark
// 0x1000/0x1000 lookup 2510 pref 9000`, `local default dev lo table
// 2510`, written with netlink through Config.Routing, verified and
// repaired like the rules, removed by Cleanup) delivers them locally.
// Never for clients in the pod CIDR or on the node (a pod's reply to a
// pod stays on the bridge). With an interface detector (BridgeInterface,
// InterfaceNamePrefix) the proxy cannot tell pods by address, and an
// accepted connection does not say which interface it came in on; so
// every externalTrafficPolicy Local port then gets an external socket of
// its own and the "-i" rule sends pod traffic to the internal socket,
// which never dials from the client's address (planFamily). Never to an
// endpoint on another node either: its
// reply would go to the client directly, bypassing this node's socket,
// and the client would reset it. eTP=Local never sends external traffic
// to remote endpoints anyway (no local endpoint: DROP); cluster traffic
// that reaches them comes from the node. Needs CAP_NET_ADMIN; without it
// the proxy logs once and connects from the node.
//
// UDP clients follow the conntrack entry of their first datagram. When a
// UDP proxy socket closes or loses its last endpoint, the backend deletes
// the entries NATed to it (Config.Conntrack), so the client's next
// datagram meets the rules in force (REJECT, or a new socket). Because
// service traffic is REDIRECTed, the conntrack reconciler of package
// conntrack must not run in this mode (see its documentation).
//
// # Balancing
//
// Each socket round-robins over its endpoints in State order (IP, then
// port); after an endpoint change the rotation continues after the last
// endpoint it picked. sessionAffinity ClientIP pins a client IP to its
// endpoint until it has been unused for the service's timeout (Clock is
// injected). TCP: a failed dial (refused, or no answer within DialTimeout)
// moves on to the next endpoint, each endpoint tried once per connection;
// the two directions are copied with io.Copy between *net.TCPConn (splice
// on Linux) and half-closes (FIN) are passed on with CloseWrite. A removed
// endpoint gets no new connections; established ones drain. UDP: one
// session (a connected socket to the endpoint) per client address:port,
// closed after UDPIdleTimeout without traffic either way (default 250ms,
// upstream's --udp-timeout), when the endpoint refuses (ICMP), or when
// the endpoint is removed. Each UDP proxy socket keeps at most
// Config.UDPMaxSessions sessions (default 1024, --userspace-udp-max-sessions;
// kube-proxy has no such cap): a datagram from a client without a session
// that arrives at the cap is dropped, counted in
// switchyard_userspace_udp_sessions_dropped_total{service_port}, and
// reaching the cap is logged once until the count falls below it again.
// Established sessions are never evicted for new ones. Replies go out of the socket the client sent
// to, from the address the client sent to (IP_PKTINFO), so conntrack can
// undo the REDIRECT/DNAT.
//
// # Metrics
//
// switchyard_userspace_active_connections{service_port} (TCP connections
// and UDP sessions), switchyard_userspace_bytes_total{service_port,
// direction="to_endpoint"|"to_client"} and
// switchyard_userspace_balancer_errors_total{reason},
// switchyard_userspace_rules_repaired_total{family} (deprecated),
// switchyard_userspace_udp_sessions_dropped_total{service_port} (UDP ports
// only), switchyard_userspace_skipped_service_ports{protocol} and
// switchyard_userspace_nodeports_unreserved{protocol}, registered on
// Config.Registerer when it is set. Series of a removed service port are
// deleted.
//
// # Relay table
//
// RelayTable lists every proxy socket (service port, family, traffic
// kind, listening address and port, endpoints, affinity, which endpoints
// it dials from the client's address); the daemon serves it read only as
// JSON at RelayTablePath on its metrics address, for `switchyard
// explain`, which cannot learn the endpoints from the kernel in this
// mode (relaytable.go).
//
// # Localhost NodePorts for the kernel modes
//
// LocalhostNodePorts (localhost.go) lends the TCP proxy to the kernel
// modes for KEP-6032's localhost NodePorts: one listener per TCP NodePort
// and family on 127.0.0.1 or ::1 and the NodePort itself, relaying to the
// Cluster endpoint selection (connections come from the node, which every
// mode short-circuits to them). No rules: the kernel modes leave loopback
// destinations alone, so the packets reach the listener. Metrics are
// kube-proxy's kubeproxy_nftables_localhost_nodeport_listeners{ip_family}
// and ..._listener_creation_failures_total{ip_family}.
//
// # Lifecycle
//
// New builds a Backend; Sync makes sockets and rules match the State;
// Cleanup removes the rules and chains; Close closes every socket and
// connection. Sockets are opened through Config.Sockets: HostSockets in
// the daemon's namespace, NetnsSockets in a named network namespace
// (tests).
package userspace
