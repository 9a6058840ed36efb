// Package sysctl reads and writes integer kernel parameters: /proc/sys
// entries by their slash-separated name ("net/ipv4/conf/all/route_localnet")
// and module parameters under /sys/module. The daemon writes the ones
// kube-proxy writes at start (conntrack tuning, route_localnet); a Fake
// stands in for them in unit tests.
//
// /proc/sys/net belongs to the network namespace of the thread that opens
// it; callers that run in one namespace (the daemon) need nothing more.
package sysctl
