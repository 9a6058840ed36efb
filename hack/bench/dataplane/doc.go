// Command dataplane is the load generator of `make bench-dataplane`
// (e2e TestBenchDataplane): a server to run in a pod namespace and four
// client workloads to run in a client namespace, each printing one JSON
// result line.
//
//	dataplane serve -rr :9000 -sink :9001 -udp :9002
//	dataplane short   -addr 10.96.0.10:80 -clients 16 -duration 3s
//	dataplane latency -addr 10.96.0.10:80 -duration 3s
//	dataplane stream  -addr 10.96.0.10:81 -duration 3s
//	dataplane udp     -addr 10.96.0.10:53 -clients 16 -duration 3s
//
// short: every connection sends one request and reads the reply; the
// server closes first (as an HTTP/1.0 server does), so the client's port is
// free at once and each connection is a new flow through the proxy's
// rules. latency: one client doing the same back to back, for the
// connect (SYN to SYN-ACK) time of an unloaded path. stream: one TCP
// connection writing as fast as it can into a sink. udp: DNS-sized
// request/response on long-lived connected sockets.
//
// -addr may list several addresses (comma separated); clients take them in
// turn, so the direct path spreads over the same servers a Service does.
// IPv6 addresses are bracketed, as net.JoinHostPort writes them
// (-addr [fd00:10:96::a]:80); the servers' ":PORT" listens on both
// families.
// Every result carries the machine's CPU time (from /proc/stat) over the
// run, per operation.
package main
