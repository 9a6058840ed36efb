package runner

import (
	"errors"
	"fmt"

	goiptables "github.com/coreos/go-iptables/iptables"
)

// withOps runs fn with fam's go-iptables handle inside the namespace.
func (r *Runner) withOps(fam Family, fn func(ops ruleOps) error) error {
	t, err := r.family(fam)
	if err != nil {
		return err
	}
	return r.ns.do(func() error { return fn(t.ops) })
}

// EnsureChain implements Interface.
func (r *Runner) EnsureChain(fam Family, table, chain string) (bool, error) {
	existed := false
	err := r.withOps(fam, func(ops ruleOps) error {
		ok, err := ops.ChainExists(table, chain)
		if err != nil || ok {
			existed = ok
			return err
		}
		if err := ops.NewChain(table, chain); err != nil {
			// Lost a race with another writer? Then it exists now.
			if ok, cerr := ops.ChainExists(table, chain); cerr == nil && ok {
				existed = true
				return nil
			}
			return err
		}
		return nil
	})
	return existed, wrap(err, "ensure chain", table, chain)
}

// ChainExists implements Interface.
func (r *Runner) ChainExists(fam Family, table, chain string) (bool, error) {
	exists := false
	err := r.withOps(fam, func(ops ruleOps) error {
		var err error
		exists, err = ops.ChainExists(table, chain)
		return err
	})
	return exists, wrap(err, "check chain", table, chain)
}

// EnsureRule implements Interface.
func (r *Runner) EnsureRule(fam Family, pos RulePosition, table, chain string, args ...string) (bool, error) {
	if pos != Prepend && pos != Append {
		return false, fmt.Errorf("iptables runner: unknown rule position %q", pos)
	}
	existed := false
	err := r.withOps(fam, func(ops ruleOps) error {
		ok, err := ops.Exists(table, chain, args...)
		if err != nil || ok {
			existed = ok
			return err
		}
		if pos == Prepend {
			return ops.Insert(table, chain, 1, args...)
		}
		return ops.Append(table, chain, args...)
	})
	return existed, wrap(err, "ensure rule in", table, chain)
}

// DeleteRule implements Interface. iptables' error texts for "no such
// rule" differ between versions and modes, so a failed delete is checked
// against the chain's real contents instead.
func (r *Runner) DeleteRule(fam Family, table, chain string, args ...string) error {
	err := r.withOps(fam, func(ops ruleOps) error {
		err := ops.Delete(table, chain, args...)
		if err == nil || !chainExists(ops, table, chain) || isNotExist(err) {
			// A rule whose jump target is gone cannot be there either:
			// iptables says so with "does not exist" (go-iptables'
			// IsNotExist), which --cleanup meets on a clean node.
			return nil
		}
		if ok, cerr := ops.Exists(table, chain, args...); cerr == nil && !ok {
			return nil
		}
		return err
	})
	return wrap(err, "delete rule from", table, chain)
}

// FlushChain implements Interface.
func (r *Runner) FlushChain(fam Family, table, chain string) error {
	err := r.withOps(fam, func(ops ruleOps) error {
		ok, err := ops.ChainExists(table, chain)
		if err != nil || !ok {
			return err
		}
		// ClearChain flushes an existing chain (it would create a missing
		// one, which the check above rules out).
		return ops.ClearChain(table, chain)
	})
	return wrap(err, "flush chain", table, chain)
}

// DeleteChain implements Interface.
func (r *Runner) DeleteChain(fam Family, table, chain string) error {
	err := r.withOps(fam, func(ops ruleOps) error {
		err := ops.DeleteChain(table, chain)
		if err == nil || !chainExists(ops, table, chain) {
			return nil
		}
		return err
	})
	return wrap(err, "delete chain", table, chain)
}

// chainExists is true unless the chain is known to be absent.
func chainExists(ops ruleOps, table, chain string) bool {
	ok, err := ops.ChainExists(table, chain)
	return err != nil || ok
}

func wrap(err error, what, table, chain string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("iptables runner: %s %s/%s: %w", what, table, chain, err)
}

// isNotExist reports whether err is go-iptables' "no such rule/chain".
func isNotExist(err error) bool {
	var e *goiptables.Error
	return errors.As(err, &e) && e.IsNotExist()
}
