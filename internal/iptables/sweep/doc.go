// Package sweep removes the iptables chains a previous service proxy left
// on the node: kube-proxy's iptables and ipvs modes (current and older
// releases), and switchyard's iptables, ipvs and userspace modes. It runs
// once the new mode's own rules are in the kernel, so that no packet ever
// meets a node without a path to its service.
//
// Plan is pure: from one table's iptables-save output and the chains the
// running mode owns, it builds one restore payload that flushes every
// leftover chain, deletes the jumps to them from the built-in chains and
// deletes them, atomically per table. Run applies it through the iptables
// runner for one family.
//
// Only names a service proxy uses are ever touched (Known); kubelet's
// chains (KUBE-FIREWALL in filter, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT)
// and every other program's chains and rules stay. A leftover chain still
// entered from a chain that is neither built-in nor a leftover is kept and
// reported, as is everything it reaches: deleting it would fail the whole
// table's transaction.
package sweep
