package userspace

import (
	"errors"
	"fmt"
	"slices"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// The chains this backend owns. The nat ones are the old kube-proxy
// userspace mode's; the filter chain refuses or drops connections to
// service ports without usable endpoints.
const (
	chainPortalsContainer  = "KUBE-PORTALS-CONTAINER"
	chainPortalsHost       = "KUBE-PORTALS-HOST"
	chainNodePortContainer = "KUBE-NODEPORT-CONTAINER"
	chainNodePortHost      = "KUBE-NODEPORT-HOST"
	chainFilter            = "KUBE-PORTALS-FILTER"
	// chainMasq (nat POSTROUTING) masquerades what the kernel fallback
	// DNATed; chainMark (mangle PREROUTING) marks packets for the
	// proxy's transparent sockets (see render.go).
	chainMasq = "KUBE-PORTALS-MASQ"
	chainMark = "KUBE-PORTALS-MARK"
)

// tableChains is a table and the chains of it this backend owns.
type tableChains struct {
	table  string
	chains []string
}

// ownedTables lists the backend's chains, in payload order.
func ownedTables() []tableChains {
	return []tableChains{
		{table: "nat", chains: []string{chainPortalsContainer, chainPortalsHost, chainNodePortContainer, chainNodePortHost, chainMasq}},
		{table: "filter", chains: []string{chainFilter}},
		{table: "mangle", chains: []string{chainMark}},
	}
}

// jump is a rule in a built-in chain that enters one of ours.
type jump struct {
	table, chain string
	pos          runner.RulePosition
	args         []string
}

// jumps are the entry rules, as upstream's userspace proxier wrote them:
// the portal chains first in PREROUTING and OUTPUT, the NodePort chains
// (which match broadly: any local address) last. The filter chain sees
// only the first packet of a connection.
func jumps() []jump {
	portals := []string{"-m", "comment", "--comment", "handle ClusterIPs; NOTE: this must be before the NodePort rules"}
	nodePorts := []string{"-m", "addrtype", "--dst-type", "LOCAL",
		"-m", "comment", "--comment", "handle service NodePorts; NOTE: this must be the last rule in the chain"}
	filter := []string{"-m", "conntrack", "--ctstate", "NEW",
		"-m", "comment", "--comment", "userspace proxy: service ports without usable endpoints"}
	masq := []string{"-m", "comment", "--comment", "userspace proxy: kernel fallback connections"}
	mark := []string{"-m", "comment", "--comment", "userspace proxy: packets for transparent proxy sockets"}
	with := func(args []string, target string) []string {
		return append(append([]string(nil), args...), "-j", target)
	}
	return []jump{
		{"nat", "PREROUTING", runner.Prepend, with(portals, chainPortalsContainer)},
		{"nat", "OUTPUT", runner.Prepend, with(portals, chainPortalsHost)},
		{"nat", "PREROUTING", runner.Append, with(nodePorts, chainNodePortContainer)},
		{"nat", "OUTPUT", runner.Append, with(nodePorts, chainNodePortHost)},
		{"filter", "INPUT", runner.Prepend, with(filter, chainFilter)},
		{"filter", "FORWARD", runner.Prepend, with(filter, chainFilter)},
		{"filter", "OUTPUT", runner.Prepend, with(filter, chainFilter)},
		{"nat", "POSTROUTING", runner.Prepend, with(masq, chainMasq)},
		{"mangle", "PREROUTING", runner.Prepend, with(mark, chainMark)},
	}
}

// ensureJumps adds the entry rules that are missing. The chains must
// exist (the restore creates them).
func ensureJumps(r runner.Interface, fam runner.Family) error {
	for _, j := range jumps() {
		if _, err := r.EnsureRule(fam, j.pos, j.table, j.chain, j.args...); err != nil {
			return fmt.Errorf("userspace: ensure jump from %s/%s: %w", j.table, j.chain, err)
		}
	}
	return nil
}

// removeRules deletes the entry rules, then flushes and deletes the
// chains. Absent rules and chains are no error; every step is tried.
func removeRules(r runner.Interface, fam runner.Family) error {
	var errs []error
	for _, j := range jumps() {
		// iptables keeps no jump to a missing chain, and cannot even
		// look for one: skip the jumps to chains already gone.
		if ok, err := r.ChainExists(fam, j.table, j.args[len(j.args)-1]); err == nil && !ok {
			continue
		}
		errs = append(errs, r.DeleteRule(fam, j.table, j.chain, j.args...))
	}
	for _, t := range ownedTables() {
		for _, c := range t.chains {
			errs = append(errs, r.FlushChain(fam, t.table, c))
		}
		for _, c := range t.chains {
			errs = append(errs, r.DeleteChain(fam, t.table, c))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("userspace: remove %s rules: %w", fam, err)
	}
	return nil
}

// OwnsChain reports whether this mode writes the chain: after a takeover
// such chains are rewritten by the first sync, never swept.
func OwnsChain(table, name string) bool {
	for _, tc := range ownedTables() {
		if tc.table == table && slices.Contains(tc.chains, name) {
			return true
		}
	}
	return false
}
