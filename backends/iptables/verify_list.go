package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// listCheck verifies one family with a runner that cannot count rules
// (see countCheck): the canaries, then the top-level chains listed one by
// one, the jumps from the built-in chains and, from one save of nat, every
// service chain. A mismatch is a reason for a full sync.
type listCheck struct {
	r         runner.Interface
	fam       runner.Family
	jumps     []jumpRule
	installed *installedChains
}

// canaries returns why a full sync is needed when a canary chain is gone
// (or cannot be checked): someone flushed our tables (firewalld reload,
// iptables -F -X), and everything must be rewritten.
func (c listCheck) canaries() string {
	for _, t := range allTables() {
		ok, err := c.r.ChainExists(c.fam, string(t), chainCanary)
		if err != nil || !ok {
			klog.InfoS("iptables canary chain gone, doing a full sync", "family", c.fam, "table", t, "err", err)
			return "canary chain gone"
		}
	}
	return ""
}

// lister is what lists chains, or false when the runner cannot: the
// check then stops at the canaries. On legacy iptables, which reads the
// whole table for every -S, one save per table is cheaper than a dozen
// listings.
func (c listCheck) lister(saved *savedTables) (runner.ChainLister, bool) {
	l, ok := c.r.(runner.ChainLister)
	if ok && c.r.Mode() == runner.ModeLegacy {
		return saved, true
	}
	return l, ok
}

// run returns why a full sync is needed, or "" when the chains hold what
// was written. A chain that cannot be listed (lock held) is an error: a
// full sync would fail the same way, the next check retries.
func (c listCheck) run(ctx context.Context, l runner.ChainLister, saved *savedTables) (string, error) {
	checks := []func(context.Context, runner.ChainLister) (string, error){c.owned, c.listedJumps,
		func(ctx context.Context, _ runner.ChainLister) (string, error) { return c.serviceChains(ctx, saved) }}
	for _, check := range checks {
		if reason, err := check(ctx, l); reason != "" || err != nil {
			return reason, err
		}
	}
	return "", nil
}

// owned compares the rule count of every top-level chain this mode wrote
// (the per-service chains are not listed: there are too many) with what
// the kernel holds.
func (c listCheck) owned(ctx context.Context, l runner.ChainLister) (string, error) {
	for _, k := range c.verifiedChains() {
		want := c.installed.chains[k]
		rules, exists, err := l.ListChain(ctx, c.fam, string(k.table), k.name)
		switch {
		case err != nil:
			return "", err
		case !exists:
			return fmt.Sprintf("chain %s/%s is gone", k.table, k.name), nil
		case len(rules) != want.rules:
			return fmt.Sprintf("chain %s/%s holds %d rules, %d were written", k.table, k.name, len(rules), want.rules), nil
		}
	}
	return "", nil
}

// verifiedChains are the installed nat and filter chains that are not
// per-service-port chains, sorted. The canaries are checked first anyway.
func (c listCheck) verifiedChains() []chainKey {
	var out []chainKey
	for k, in := range c.installed.chains {
		// KUBE-FIREWALL is shared with kubelet, which may add to it.
		skip := k.table == tableMangle || k.name == chainCanary || k.name == chainKubeletFirewall || isServiceChain(k.name)
		if in.known && !skip {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// listedJumps checks that the built-in chains still jump to ours
// (`iptables -F` flushes INPUT, FORWARD and OUTPUT with everything else).
func (c listCheck) listedJumps(ctx context.Context, l runner.ChainLister) (string, error) {
	listed := map[chainKey][]string{}
	for _, j := range c.jumps {
		k := chainKey{table: j.table, name: j.from}
		rules, ok := listed[k]
		if !ok {
			var err error
			if rules, _, err = l.ListChain(ctx, c.fam, string(j.table), j.from); err != nil {
				return "", err
			}
			listed[k] = rules
		}
		if !slices.ContainsFunc(rules, func(r string) bool { return strings.HasSuffix(r, " -j "+j.to) }) {
			return fmt.Sprintf("the jump %s/%s -> %s is gone", j.table, j.from, j.to), nil
		}
	}
	return "", nil
}

// serviceChains compares the rule count of every service chain
// switchyard wrote with one save of the nat table: a chain flushed or
// deleted behind its back, while the KUBE-SERVICES rule jumping to it
// stays, breaks that one service and nothing else shows it.
func (c listCheck) serviceChains(ctx context.Context, saved *savedTables) (string, error) {
	data, err := saved.table(ctx, c.fam, string(tableNAT))
	if err != nil {
		return "", err
	}
	counts := ruleCounts(data)
	for k, in := range c.installed.chains {
		if k.table != tableNAT || !in.known || !isServiceChain(k.name) {
			continue
		}
		n, exists := counts[k.name]
		switch {
		case !exists:
			return fmt.Sprintf("chain nat/%s is gone", k.name), nil
		case n != in.rules:
			return fmt.Sprintf("chain nat/%s holds %d rules, %d were written", k.name, n, in.rules), nil
		}
	}
	return "", nil
}

// ruleCounts maps each chain declared in an iptables-save dump to its
// number of rules.
func ruleCounts(data []byte) map[string]int {
	counts := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			counts[name] += 0
		case strings.HasPrefix(line, "-A "):
			name, _, _ := strings.Cut(line[3:], " ")
			counts[name]++
		}
	}
	return counts
}

// savedTables serves ListChain from one iptables-save per table.
type savedTables struct {
	r     runner.Interface
	saved map[string][]byte
}

// table returns the saved table, saving it on first use.
func (s *savedTables) table(ctx context.Context, fam runner.Family, table string) ([]byte, error) {
	data, ok := s.saved[table]
	if !ok {
		var err error
		if data, err = s.r.SaveTable(ctx, fam, table); err != nil {
			return nil, err
		}
		s.saved[table] = data
	}
	return data, nil
}

func (s *savedTables) ListChain(ctx context.Context, fam runner.Family, table, chain string) ([]string, bool, error) {
	data, err := s.table(ctx, fam, table)
	if err != nil {
		return nil, false, err
	}
	if !slices.Contains(runner.SavedChains(data), chain) {
		return nil, false, nil
	}
	var rules []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "-A "+chain+" ") || line == "-A "+chain {
			rules = append(rules, line)
		}
	}
	return rules, true, nil
}
