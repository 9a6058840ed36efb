package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// When a partial sync first checks that the chains this mode owns at the
// top level still hold what it wrote (reconcile.Cadence decides when).
//
// The canary chains only reveal a deleted table or chain (`iptables -X`,
// a firewalld reload). An operator's `iptables -t nat -F`, `-F
// KUBE-SERVICES` or `-D KUBE-SERVICES ...` leaves them in place while
// every service stops working, and partial syncs never rewrite an
// unchanged chain. So a periodic sync (Diff.Verify), or any partial sync
// once the last check is older than the interval, first checks the
// family's chains: nothing is read while the fingerprint shows no other
// writer (fingerprint.go); otherwise every chain's rule count is
// compared with what was written, read without iptables-save
// (verify_counts.go), and the chains found changed are rewritten by the
// same sync (repair.go). With a runner that cannot count rules, the
// top-level chains are listed one by one and nat is saved once
// (verifyReason below), and a mismatch turns the sync into a full one.

// verifyReason checks the family's chains with a runner that cannot count
// rules (see verifyByCounts) and returns why a full sync is needed, or ""
// when they hold what was written: the top-level chains, the jumps from
// the built-in chains and, from one save of nat, every service chain. A
// chain that cannot be listed (lock held, runner without ChainLister) is
// not a reason: a full sync would fail the same way.
func (f *familySync) verifyReason(ctx context.Context, b *Backend, diff *proxier.Diff) string {
	lister, ok := b.runner.(runner.ChainLister)
	if !ok || !b.verify.Due(diff, f.verifiedAt) {
		return ""
	}
	f.verifiedAt = b.verify.Now()
	saved := &savedTables{r: b.runner, saved: map[string][]byte{}}
	if b.runner.Mode() == runner.ModeLegacy {
		// Legacy iptables reads the whole table for every -S: one save
		// per table is cheaper than a dozen listings.
		lister = saved
	}
	checks := []func(context.Context, runner.ChainLister) (string, error){f.verifyOwned, f.verifyJumps,
		func(ctx context.Context, l runner.ChainLister) (string, error) {
			return f.verifyServiceChains(ctx, l, saved)
		}}
	for _, check := range checks {
		reason, err := check(ctx, lister)
		if err != nil {
			klog.V(2).InfoS("Cannot verify iptables chains; will retry", "family", f.fam, "err", err)
			return ""
		}
		if reason != "" {
			klog.InfoS("iptables rules were changed outside switchyard; doing a full sync", "family", f.fam, "found", reason)
			return "rules changed outside switchyard: " + reason
		}
	}
	return ""
}

// verifyOwned compares the rule count of every top-level chain this mode
// wrote (the per-service chains are not listed: there are too many) with
// what the kernel holds.
func (f *familySync) verifyOwned(ctx context.Context, l runner.ChainLister) (string, error) {
	for _, k := range f.verifiedChains() {
		want := f.installed[k]
		rules, exists, err := l.ListChain(ctx, f.fam, string(k.table), k.name)
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
// per-service-port chains, sorted. The canaries are checked on every
// partial sync anyway.
func (f *familySync) verifiedChains() []chainKey {
	var out []chainKey
	for k, c := range f.installed {
		// KUBE-FIREWALL is shared with kubelet, which may add to it.
		skip := k.table == tableMangle || k.name == chainCanary || k.name == chainKubeletFirewall || isServiceChain(k.name)
		if c.known && !skip {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, compareKeys)
	return out
}

// verifyJumps checks that the built-in chains still jump to ours (`iptables
// -F` flushes INPUT, FORWARD and OUTPUT with everything else).
func (f *familySync) verifyJumps(ctx context.Context, l runner.ChainLister) (string, error) {
	listed := map[chainKey][]string{}
	for _, j := range jumpRules(f.fc.localhostNodePorts, f.fc.serviceTraffic, f.fam == runner.IPv4) {
		k := chainKey{table: j.table, name: j.from}
		rules, ok := listed[k]
		if !ok {
			var err error
			if rules, _, err = l.ListChain(ctx, f.fam, string(j.table), j.from); err != nil {
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
	if !slices.Contains(chainsInSave(data), chain) {
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
