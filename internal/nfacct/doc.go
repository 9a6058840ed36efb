// Package nfacct creates and reads nfnetlink_acct counters, the named
// packet/byte counters iptables rules update with `-m nfacct --nfacct-name
// NAME`. kube-proxy's iptables mode counts two things with them, and
// switchyard does the same under the same names: packets dropped as
// conntrack INVALID in KUBE-FORWARD (ct_state_invalid_dropped_pkts) and
// packets accepted for localhost NodePorts (localhost_nps_accepted_pkts);
// Collector turns them into kube-proxy's metrics.
//
// Netlink is the NFNL_SUBSYS_ACCT subsystem of NETLINK_NETFILTER, spoken
// through vishvananda/netlink's request and attribute helpers; Fake stands
// in for it in unit tests.
package nfacct
