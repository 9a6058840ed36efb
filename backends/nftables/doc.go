// Package nftables is switchyard's nftables proxy mode
// (--proxy-mode=nftables): its own table "kube-proxy" in the ip and ip6
// families, nothing outside them, built so that the common change (an
// endpoint appears, disappears or changes readiness) is data, not rules.
//
// Why data: when a transaction adds a rule holding a jump, goto, nat or
// masquerade statement, or a verdict-map element naming a chain, the
// kernel re-validates every rule reachable from the table's base chains
// before it commits (about 300 ms at 10k services x 10 endpoints in
// kube-proxy's layouts, kernel 6.18). Adding or deleting elements of sets
// and maps whose data is not a verdict skips that walk.
//
// Layout (names as upstream kube-proxy's nftables mode where the
// structure is the same):
//
//   - nat-prerouting / nat-output jump to "services", which dispatches on
//     the verdict maps "service-ips" (ip daddr . meta l4proto . th dport)
//     and "service-nodeports" (meta l4proto . th dport, on local
//     addresses or --nodeport-addresses) to one chain per service port:
//     "service-<hash>-ns/name/proto/port" for its cluster IP (masquerade
//     rule, then DNAT) and "external-..." for NodePort, external and
//     load-balancer IPs (kube-proxy's KUBE-EXT semantics, including the
//     externalTrafficPolicy=Local short-circuits).
//   - DNAT draws a slot: "dnat ip to numgen random mod 65536 offset O map
//     @endpoints-N". Each endpoint group (the Cluster or Local endpoints
//     of a port) owns 65,536 slots of an interval map shared by 16 groups;
//     its endpoints split them into equal ranges, so an endpoint's share
//     is within n/65536 of 1/n (0.015 % of the target at n = 10). Adding,
//     removing or replacing an endpoint changes map elements only; with
//     the same number of endpoints a replacement rewrites one range.
//   - Services with no usable endpoint are elements of the sets
//     "services-without-endpoints" / "nodeports-without-endpoints", rejected (TCP
//     reset, ICMP port unreachable) in filter chains at priority
//     dstnat-10, before any DNAT; so losing or regaining the last
//     endpoint is data too. (Upstream uses verdict maps there.)
//   - Hairpin traffic (a pod reaching itself through a service) is
//     masqueraded in nat-postrouting by a lookup of "ip saddr . ip daddr"
//     in the set "hairpin-endpoints", instead of a rule per endpoint.
//   - ClientIP session affinity is, as upstream's, a dynamic set of
//     clients per endpoint; those ports' endpoint changes rewrite their
//     chain (nft 1.0 aborts when printing the data-only alternatives, and
//     an operator's `nft list ruleset` must work).
//   - loadBalancerSourceRanges: "firewall-ips" verdict map to a
//     "firewall-..." chain per port in filter-prerouting-pre-dnat.
//   - With --service-traffic-metrics (Config.ServiceTraffic), the sets
//     "service-traffic" and "service-connections", keyed like
//     "service-ips" and declared with per-element counters, are looked up
//     first in the filter chains: every packet to a service address, and
//     every new connection, bumps its element's counter; elements carry
//     "namespace/name:port" as their comment, and ServiceTraffic reads
//     them at scrape time (servicetraffic.go).
//
// Why shared maps of 16 groups: the kernel finds a set by name by walking
// the table's set list for every rule that refers to one, and inserts an
// interval by walking the map's nodes. At 10k service ports one map each
// took 50 s to load, one map for all 17 s with 20-40 ms per element
// change; maps of 16 groups load in under 2 s with 1-2 ms changes.
//
// Library: github.com/google/nftables (netlink). The alternative,
// sigs.k8s.io/knftables, runs the nft binary, which first dumps the
// ruleset into its cache: at 10k services one element added through nft
// costs hundreds of milliseconds (hack/bench/nftables measures it beside
// the backend), against a few milliseconds for the whole netlink
// transaction of a one-endpoint change. The backend needs only a handful
// of expression kinds; ruleset compiles them. The library builds the
// messages; internal/nfnetlink writes the batch, the element messages
// and every dump (its documentation says why).
//
// Syncs: a full sync (first, asked, after a failure, or after the
// periodic check found the table changed) lists the table's chains and
// sets and rewrites everything in one transaction: chains and sets
// first, then rules, then elements (a rule binding a map walks its
// elements, so binding empty maps keeps it linear); the affinity sets
// keep their clients. The first full sync of a process over a live table
// of its own (a restart) reads the table back instead and writes only
// what differs (readback.go): elements are compared one by one, and a
// service port's chain is left alone when the tag its verdict-map
// elements carry (the print of its rules, its endpoint groups) matches
// the render. A partial sync renders only the changed ports, as
// they were (proxier.Diff.Previous) and as they are, and writes the
// difference. A periodic sync is free when the ruleset generation is
// unchanged since our last commit; otherwise it counts rules per chain
// and elements per set and rewrites the table if they differ. A rejected
// transaction changes nothing (the kernel commits all or nothing); the
// error is returned and counted, and the next sync is full.
//
// Reading the code, one sync in order: Backend.Sync (backend.go) hands
// each family to familySync.sync (sync.go), which decides full or
// partial, runs the periodic check, counts a repair and stamps the
// generation. A partial sync (partial.go) renders the changed ports as
// written and as wanted (render_port.go, its chains render_chains.go,
// endpoint groups groups.go), stages the element difference (delta, in
// the same file) and commits one transaction through Conn (netlink.go).
// A full sync (full.go) numbers the groups, reads a restarted table back
// (readback.go) and writes in chunks (chunked.go), through the handover
// table over another program's table (handover.go).
//
// Render is pure (State -> ruleset objects); Conn is the only I/O; the
// strict fake in nftablestest applies transactions as the kernel would.
package nftables
