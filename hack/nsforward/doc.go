// Command nsforward makes a TCP address of the host network namespace (for
// example kube-apiserver on 127.0.0.1:6443) reachable inside another network
// namespace, at an address of that namespace (usually the same 127.0.0.1:6443,
// so one kubeconfig and one serving certificate work on both sides).
//
// The listening socket is created inside the target namespace: a socket keeps
// the namespace it was created in, so nsforward switches one locked OS thread
// into the namespace only for the socket(2)/bind(2)/listen(2) calls. Every
// accepted connection is then dialled from the host namespace and the bytes
// are copied both ways. No veth, route or firewall change is needed.
//
// With -reverse it works the other way round: it listens in its own (host)
// namespace and dials -target inside -netns, so a server inside a namespace
// (hack/cluster's kube-apiserver) is reachable from the host's loopback.
//
// Usage:
//
//	nsforward -netns /run/netns/NAME -listen 127.0.0.1:6443 -target 127.0.0.1:6443
//	nsforward -reverse -netns /run/netns/NAME -listen 127.0.0.1:16443 -target 10.0.0.1:6443
//
// It prints "listening on ADDR" to stdout once the socket is ready and exits
// on SIGINT/SIGTERM.
package main
