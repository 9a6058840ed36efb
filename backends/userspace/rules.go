package userspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// The iptables rules and the policy routing: the Backend's kernel I/O
// besides its sockets. What the rules are is render.go's and chains.go's.

// applyLocked restores one family's rules and, on full syncs, makes sure
// the jumps into them exist.
func (b *Backend) applyLocked(ctx context.Context, fam runner.Family, payload []byte, full bool) error {
	last, known := b.applied[fam]
	if !full && known && bytes.Equal(last, payload) {
		return nil
	}
	if err := b.cfg.Runner.Restore(ctx, fam, payload); err != nil {
		delete(b.applied, fam)
		klog.ErrorS(err, "Restoring userspace proxy rules failed", "family", fam,
			"lines", runner.OffendingLines(payload, err))
		return fmt.Errorf("userspace: restore %s rules: %w", fam, err)
	}
	if full || !known {
		if err := ensureJumps(b.cfg.Runner, fam); err != nil {
			delete(b.applied, fam)
			return err
		}
		if err := b.ensureRouting(fam); err != nil {
			delete(b.applied, fam)
			return err
		}
	}
	b.applied[fam] = payload
	return nil
}

// ensureRouting adds the policy routing of fam, if the backend writes
// any.
func (b *Backend) ensureRouting(fam runner.Family) error {
	if b.cfg.Routing == nil {
		return nil
	}
	if err := b.cfg.Routing.EnsurePolicyRoute(familyOfRunner(fam), b.cfg.policyRoute()); err != nil {
		return fmt.Errorf("userspace: %s policy routing: %w", fam, err)
	}
	return nil
}

// removeRulesLocked removes the jumps, chains and policy routing of every
// configured family (Cleanup); the next sync writes everything.
func (b *Backend) removeRulesLocked() error {
	var errs []error
	for _, fam := range b.cfg.Families {
		errs = append(errs, removeRules(b.cfg.Runner, runnerFamily(fam)))
		if b.cfg.Routing != nil {
			if err := b.cfg.Routing.RemovePolicyRoute(fam, b.cfg.policyRoute()); err != nil {
				errs = append(errs, fmt.Errorf("userspace: remove %s policy routing: %w", fam, err))
			}
		}
	}
	clear(b.applied)
	return errors.Join(errs...)
}

// damage is what a check found changed: rules (this mode's chains and
// the jumps to them) and policy routing.
type damage struct{ rules, routes []string }

func (d damage) found() []string { return append(slices.Clone(d.rules), d.routes...) }

// damageLocked finds what the kernel lost or changed of the rules last
// written for fam, and of the policy routing: it lists this mode's
// chains and the built-in chains holding its jumps, one chain per
// command (five of ours and five built-in ones, never a whole table). A chain that cannot be
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
