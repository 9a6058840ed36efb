// Package ipvs is switchyard's IPVS proxy mode, after kube-proxy's:
// every service address is bound to the dummy interface kube-ipvs0 so the
// node accepts its packets, and IPVS (in LOCAL_IN) balances each
// connection to a real server with NAT (masquerading forward method,
// weight 1). Companion ipsets and iptables rules do what IPVS does not:
// masquerading, REJECT and DROP verdicts, loadBalancerSourceRanges.
//
// # Rendering
//
// Render is pure. For each configured family and service port it asks
// the shared selection (proxier.SelectEndpoints) for the endpoints and
// produces:
//   - one virtual server per (address, port, protocol): the cluster IP
//     with the Internal endpoints; each external IP, load-balancer IP and
//     NodePort address (State.Node.Addresses inside
//     Config.NodePortAddresses) with the External ones; scheduler from
//     Config; sessionAffinity ClientIP as IPVS persistence (flag
//     persistent, timeout in seconds, one-address netmask);
//   - the addresses to bind to kube-ipvs0;
//   - set entries: KUBE-CLUSTER-IP, KUBE-EXTERNAL-IP(-LOCAL),
//     KUBE-LOAD-BALANCER(-LOCAL, -FW, -SOURCE-CIDR), KUBE-NODE-PORT-<PROTO>
//     (-LOCAL-), KUBE-LOOP-BACK (IPv6 sets are named KUBE-6-...);
//   - filter rules (KUBE-SERVICES, KUBE-EXTERNAL-SERVICES): REJECT when the
//     port has no usable endpoint, DROP when a Local policy leaves none.
//
// The nat rules are static (they match the sets): KUBE-SERVICES flags for
// masquerade (KUBE-MARK-MASQ) what leaves the pod network or enters from
// outside, KUBE-NODE-PORT and KUBE-LOAD-BALANCER do the same unless
// externalTrafficPolicy is Local, KUBE-POSTROUTING masquerades flagged
// packets and hairpin traffic (KUBE-LOOP-BACK).
//
// # externalTrafficPolicy Local
//
// A NodePort / external IP / LB virtual server has only this node's
// endpoints, and its traffic keeps its source. But pods and the node
// itself must reach every endpoint, as in kube-proxy's iptables mode
// (and the shared packet-flow table): IPVS cannot pick real servers by
// source, so such a port also gets a firewall-mark virtual server with
// the Internal endpoints. nat KUBE-IPVS-INTERNAL, entered for sources in
// the cluster CIDR or local to the node, marks connections to the port's
// external addresses with the port's mark (Config.InternalMarkMask, one
// value per port; IPVS looks fwmark services up first). Node-originated
// marked connections are masqueraded in KUBE-POSTROUTING; the DROP for
// "no local endpoint" spares marked packets.
//
// # Applying
//
// Apply reconciles; it never flushes. The model keeps every port's
// rendering and, for shared objects, reference counts.
//   - A full sync (first sync, Diff.Full, which the runner also sets
//     after any failure, or a changed node address) lists the kernel: every virtual server and its real
//     servers, the addresses of kube-ipvs0, `ipset save`, and iptables-save
//     for the jumps from the built-in chains; then adds, updates and
//     deletes only what differs. Virtual servers nobody wants are deleted
//     (switchyard owns IPVS on the node, like kube-proxy).
//   - A partial sync re-renders only the ports the Diff names and touches
//     only the virtual servers, addresses and set entries whose desired
//     state changed (virtual servers are still listed, their real servers
//     read only for touched ones).
//   - Our iptables chains are written with one iptables-restore per
//     family when their text changed (or on full syncs, or when a
//     verification found them changed: see below).
//
// Order: sets (the rules match them), virtual servers, addresses, rules,
// then draining real servers. Sysctls (net/ipv4/vs/conntrack=1,
// expire_nodest_conn=1, expire_quiescent_template=1, conn_reuse_mode=0
// before Linux 5.9, ip_forward=1, arp_ignore=1/arp_announce=2 with
// StrictARP) and the IPVS timeouts are set on the first full sync.
//
// # Verification and repair
//
// IPVS forwards without its companions, so a firewall reload, an `ipset
// flush`, a deleted kube-ipvs0 or an `ipvsadm -d` would silently disable
// loadBalancerSourceRanges, hairpin and masquerade (or a service) until
// the hourly full sync. The periodic sync (Diff.Verify, every two thirds
// of --ipvs-sync-period) and any partial sync once the last check is
// older than Config.VerifyInterval checks, before it renders, every
// piece of kernel state this mode owns, and the same sync repairs only
// what differs (verify.go; each applier reads back its own kernel API):
//   - iptables per family: nothing is read while the fingerprint (the
//     nf_tables generation, or the legacy tables' entry counts) shows no
//     other writer since our last write; otherwise our chains' rule
//     counts and the jumps from the built-in chains are compared with
//     what was written (like the iptables mode, without iptables-save),
//     and a family that differs gets its restore and jumps again;
//   - ipsets: member counts (`ipset list -terse`), and `ipset save` with
//     the full sync's diff only when one moved;
//   - kube-ipvs0: its address listing against the model (link recreated,
//     addresses re-added);
//   - IPVS: one read of /proc/net/ip_vs compared in memory; the virtual
//     servers found different are reconciled over netlink.
//
// Each repair is logged (what was missing, per kind and family) and
// counted in switchyard_ipvs_state_repaired_total{kind,family}. Costs at
// 10k services are in docs/ipvs-repair.md.
//
// # Graceful termination
//
// A real server leaving a TCP (or fwmark) virtual server while it has
// connections gets weight 0 and is deleted by a later sync once
// ActiveConnections and InactiveConnections are both 0, or after
// Config.GracefulTerminationTimeout; if its endpoint comes back first it
// returns to weight 1. UDP and SCTP real servers are deleted at once
// (expire_nodest_conn=1 moves their flows). A restarted backend finds
// weight-0 servers on its first full sync and drains them again.
//
// # Reading the code
//
// The sync type, Backend, has its entry points in backend.go and one
// sync's decisions in sync.go (full or partial, verify, apply order;
// internal/reconcile's Cadence, Stamp and Repairs). Render is pure and
// no method of Backend: render.go (service port -> virtual servers,
// addresses, set entries, rules), rules.go (iptables text), sets.go,
// virtualserver.go, fwmark.go, into the model (model.go), which the
// appliers read. Kernel I/O is one applier per kernel API, each writing,
// reading back (verify) and cleaning up its own: apply_sets.go
// (ipset), apply_ipvs.go (IPVS), apply_addrs.go (kube-ipvs0),
// apply_iptables.go (iptables; per family, the payload written and its
// reconcile.Stamp). graceful.go tracks draining real servers, sysctl.go
// sets the sysctls up.
//
// # Kernel access
//
// Everything goes through small interfaces (IPVS, Netlink, ipset.Interface,
// Sysctl, runner.Interface) bundled in Kernel; NewKernel opens the real ones
// in a named network namespace (or the current one); backends/ipvs/ipvstest
// has stateful fakes and the packet-flow model. Metrics
// (switchyard_ipvs_virtual_servers, _real_servers,
// _real_server_active_connections, _real_server_inactive_connections) are a
// prometheus.Collector reading the kernel at scrape time;
// switchyard_ipvs_state_repaired_total counts repairs.
//
// The kernel tests (IPVS_VM=1) run in a QEMU VM with Debian's kernel:
// hack/vm/test-ipvs.sh.
package ipvs
