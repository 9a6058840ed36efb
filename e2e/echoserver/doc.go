// Command echoserver is the "pod" workload of switchyard's end-to-end tests.
// It answers every TCP line and every UDP datagram with its own name and the
// source address it saw, e.g. "pod-a 10.0.0.5:41234\n", so a test can tell
// which backend a Service sent it to and whether the source was masqueraded.
//
// Usage:
//
//	echoserver -name pod-a -tcp :8080 -udp :8080
//
// A TCP connection gets one reply per line it sends and stays open until the
// client closes it. An empty -tcp or -udp disables that protocol.
package main
