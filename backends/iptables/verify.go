package iptables

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/switchyard-proxy/switchyard/backends/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// DefaultVerifyInterval bounds how long partial syncs may go without
// verifying the top-level chains while changes keep arriving: the
// proxier's periodic sync (Diff.Verify) only comes after a quiet sync
// period.
const DefaultVerifyInterval = time.Minute

// verifyPolicy decides when a partial sync first checks that the chains
// this mode owns at the top level still hold what it wrote.
//
// The canary chains only reveal a deleted table or chain (`iptables -X`,
// a firewalld reload). An operator's `iptables -t nat -F`, `-F
// KUBE-SERVICES` or `-D KUBE-SERVICES ...` leaves them in place while
// every service stops working, and partial syncs never rewrite an
// unchanged chain. So a periodic sync (Diff.Verify), or any partial sync
// once the last check is older than the interval, first lists the
// family's top-level chains and the built-in chains holding its jumps,
// one chain per command, never the whole table (iptables-save takes
// minutes on a 10,000-service nft table, listing a chain milliseconds;
// KUBE-SERVICES, one rule per service port, is the dearest: ~130 ms at
// 10,000), and compares rule counts with what it last wrote. A mismatch
// turns the sync into a full one.
type verifyPolicy struct {
	interval time.Duration // <0: never verify
	clock    clock.PassiveClock
}

func newVerifyPolicy(cfg *Config) verifyPolicy {
	p := verifyPolicy{interval: cfg.VerifyInterval, clock: cfg.Clock}
	if p.interval == 0 {
		p.interval = DefaultVerifyInterval
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	return p
}

// due says whether a partial sync with diff verifies first, given the time
// of the family's last verification (or full sync).
func (p verifyPolicy) due(diff *proxier.Diff, last time.Time) bool {
	if p.interval < 0 {
		return false
	}
	return diff.Verify || p.clock.Since(last) >= p.interval
}

// verifyReason checks the family's chains and returns why a full sync is
// needed, or "" when they hold what was written. Nothing is read while
// the kernel's fingerprint shows no other writer since the last sync (see
// fingerprint.go); otherwise the top-level chains, the jumps from the
// built-in chains and every service chain are compared. A chain that
// cannot be listed (lock held, runner without ChainLister) is not a
// reason: a full sync would fail the same way.
func (f *familySync) verifyReason(ctx context.Context, b *Backend, diff *proxier.Diff) string {
	lister, ok := b.runner.(runner.ChainLister)
	if !ok || !b.verify.due(diff, f.verifiedAt) {
		return ""
	}
	f.verifiedAt = b.verify.clock.Now()
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
	for _, j := range jumpRules(f.fc.localhostNodePorts, f.fam == runner.IPv4) {
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
