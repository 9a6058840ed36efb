package userspace

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// A sync skips the restore when the rules it renders are the ones it
// last wrote, so without a check nothing would put back rules someone
// removed: `iptables -t nat -F`, `iptables -F`, `-X`, or a firewall
// service reloading its tables leaves every service port unreachable
// while the proxy sockets keep listening. So the periodic sync
// (Diff.Verify), and any sync once the last check is older than
// Config.VerifyInterval (changes that keep arriving postpone the periodic
// one), lists this mode's chains and the built-in chains holding its
// jumps, one chain per command: five of ours and five built-in ones,
// never a whole table. Anything missing or changed turns the family's
// sync into a full one (restore and jumps); the sockets are not touched,
// so established connections, which conntrack keeps NATed, go on.

// verifyDueLocked says whether a sync of fam checks its rules first.
func (b *Backend) verifyDueLocked(diff *proxier.Diff, fam runner.Family) bool {
	return b.cadence.Due(diff, b.verifiedAt[fam])
}

// damage is what a check found changed: rules (this mode's chains and
// the jumps to them) and policy routing.
type damage struct{ rules, routes []string }

func (d damage) found() []string { return append(slices.Clone(d.rules), d.routes...) }

// damageLocked finds what the kernel lost or changed of the rules last
// written for fam, and of the policy routing. A chain that cannot be
// listed (xtables lock held, runner without ChainLister) is not damage: a
// restore would fail the same way, and the next check retries.
func (b *Backend) damageLocked(ctx context.Context, fam runner.Family) damage {
	lister, ok := b.cfg.Runner.(runner.ChainLister)
	payload, written := b.applied[fam]
	if !ok || !written {
		return damage{}
	}
	b.verifiedAt[fam] = b.cadence.Now()
	owned, err := ownedDamage(ctx, lister, fam, runner.PayloadRuleCounts(payload))
	if err != nil {
		klog.V(2).InfoS("Cannot verify userspace proxy rules; will retry", "family", fam, "err", err)
		return damage{}
	}
	missing, err := missingJumps(ctx, lister, fam)
	if err != nil {
		klog.V(2).InfoS("Cannot verify userspace proxy rules; will retry", "family", fam, "err", err)
		return damage{}
	}
	d := damage{rules: append(owned, missing...)}
	if b.cfg.Routing != nil {
		lost, err := b.cfg.Routing.PolicyRouteMissing(familyOfRunner(fam), b.cfg.policyRoute())
		if err != nil {
			klog.V(2).InfoS("Cannot verify userspace policy routing; will retry", "family", fam, "err", err)
			return d
		}
		d.routes = lost
	}
	return d
}

// ownedDamage compares the rule count of each of this mode's chains with
// the count written.
func ownedDamage(ctx context.Context, l runner.ChainLister, fam runner.Family, written map[runner.TableChain]int) ([]string, error) {
	var found []string
	for _, t := range ownedTables() {
		for _, c := range t.chains {
			rules, exists, err := l.ListChain(ctx, fam, t.table, c)
			want := written[runner.TableChain{Table: t.table, Chain: c}]
			switch {
			case err != nil:
				return nil, fmt.Errorf("userspace: list %s/%s: %w", t.table, c, err)
			case !exists:
				found = append(found, fmt.Sprintf("chain %s/%s was deleted", t.table, c))
			case len(rules) != want:
				found = append(found, fmt.Sprintf("chain %s/%s holds %d rules, %d were written", t.table, c, len(rules), want))
			}
		}
	}
	return found, nil
}

// missingJumps lists the entry rules the built-in chains lost (`iptables
// -F` flushes them with everything else). Each built-in chain is listed
// once.
func missingJumps(ctx context.Context, l runner.ChainLister, fam runner.Family) ([]string, error) {
	listed := map[runner.TableChain][]string{}
	var found []string
	for _, j := range jumps() {
		k := runner.TableChain{Table: j.table, Chain: j.chain}
		rules, ok := listed[k]
		if !ok {
			var err error
			if rules, _, err = l.ListChain(ctx, fam, j.table, j.chain); err != nil {
				return nil, fmt.Errorf("userspace: list %s/%s: %w", j.table, j.chain, err)
			}
			listed[k] = rules
		}
		target := j.args[len(j.args)-1]
		if !slices.ContainsFunc(rules, func(r string) bool { return strings.HasSuffix(r, " -j "+target) }) {
			found = append(found, fmt.Sprintf("jump %s/%s to %s was deleted", j.table, j.chain, target))
		}
	}
	return found, nil
}
