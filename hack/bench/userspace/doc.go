// Command userspace compares, on this host's kernel, short TCP
// connections through a userspace-mode ClusterIP and through an
// iptables-mode ClusterIP (issue 15): for each, N connections (default
// 1000), one after the other, each connecting, sending a 16-byte request,
// half-closing, reading the whole reply and closing. It prints
// connections/s and the p50 and p99 of the per-connection latency
// (connect to close), per run and the median run.
//
// Everything happens in three network namespaces it creates and deletes:
//
//	client 192.168.77.2 --veth-- 192.168.77.1 node 10.244.77.1 --veth-- 10.244.77.2 pod
//
// The node namespace holds both modes at once, on two cluster IPs: the
// userspace backend (10.96.77.10, in a child process that runs inside the
// node namespace with ordinary sockets, as the daemon does) and the
// iptables backend (10.96.77.20, programmed from this process through
// `ip netns exec`). The pod's server and the client are child processes
// inside their namespaces too, so no measured socket pays a namespace
// switch. Runs alternate between the modes so that drift on a shared
// machine hits both alike.
//
// Needs root. `hack/bench.sh` runs it when BENCH_USERSPACE=1 (default).
package main
