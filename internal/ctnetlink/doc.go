// Package ctnetlink speaks conntrack netlink (NFNL_SUBSYS_CTNETLINK)
// without holding a table in memory: dumps are streamed a datagram at a
// time through one reused buffer and may carry a kernel-side filter
// (CTA_FILTER, Linux 5.8 and later: the kernel walks its table and sends
// only the entries of one protocol, original destination or reply
// source), and requests that need no answer (creating or deleting
// entries) are sent many to a sendmsg, with the kernel's errors counted
// from what it queues.
//
// A kernel older than CTA_FILTER is expected to ignore the attribute and
// send every entry of the family (not tested): callers must still decide
// on every entry they get (Filter narrows, it never decides). A filter
// naming an IPv6 address did not return that address's entries on the
// kernels tried (an IPv4 address works); the conntrack reconciler's IPv6
// passes filter by protocol alone.
//
// The conntrack reconciler (conntrack/) dumps and deletes through it; the
// conntrack scale harness (conntrack/conntracktest, e2e) fills tables of
// millions of entries and checks them through it. Attribute layout comes
// from internal/nfnetlink.
package ctnetlink
