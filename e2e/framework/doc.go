// Package framework is the harness of switchyard's end-to-end tests: a real
// kube-apiserver + etcd on loopback (hack/local-up.sh), "node", "pod" and
// "client" network namespaces wired with veths and a bridge, echo servers in
// the pods, the real switchyard binary in the node namespace, real TCP/UDP
// clients and a real Prometheus scraping the daemon.
//
// The package itself has no build tag so it compiles (and its unit tests run)
// in normal builds; the tests that use it live in package e2e behind the
// `e2e` build tag and must run as root:
//
//	go test -tags e2e ./e2e/ -v
//
// Layering:
//
//   - Suite (once per `go test` run, from TestMain): the Cluster, a Builder
//     for the helper binaries, the deploy/ manifests applied server-side and a
//     kubeconfig carrying a TokenRequest token of ServiceAccount
//     kube-system/switchyard, the daemon's production identity.
//   - Env (once per test, from Setup): a Topology of namespaces named with a
//     random per-test id, echo servers, nsforward exposing the apiserver in the
//     node namespace, a Node object and a Kubernetes namespace for the test's
//     Services. Everything is removed by t.Cleanup, also when the test fails.
//   - StartDaemon / StartPrometheus and the TCP/UDP echo clients drive a test.
//
// IP families: a TopologySpec's Shape (ShapeIPv4, the default, ShapeIPv6 or
// ShapeDual) decides the addresses of every link (IPv6 from fd00::/8 with
// duplicate address detection off, IPv6 forwarding on in the node), the
// Node object's InternalIPs and podCIDRs, the daemon's --cluster-cidr (one
// CIDR per family), and the families of the Services (Env.CreateService:
// SingleStack IPv6 or RequireDualStack) and EndpointSlices (one per family,
// Env.CreatePodSlices) a test creates. Topology.For gives one family's view
// of a topology, so a check written once runs over each family. The
// control plane the suite starts has a dual-stack service range
// (DefaultServiceCIDRs), IPv4 first, so Services that name no family stay
// IPv4.
//
// Safety: every interface, address, route and sysctl is created inside
// namespaces this package creates and deletes; processes are stopped by the
// PID this package started. The host namespace is never modified.
package framework
