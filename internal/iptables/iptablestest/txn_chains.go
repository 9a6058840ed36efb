package iptablestest

import "fmt"

// flush empties a chain, or every chain of the table when name is "".
func (x *txn) flush(name string) error {
	names := []string{name}
	if name == "" {
		names = x.t.chainOrder()
	}
	for _, n := range names {
		c, err := x.chain(n)
		if err != nil {
			return err
		}
		for _, r := range c.rules {
			x.ref(r, -1)
		}
		c.rules, c.keys = nil, nil
	}
	return nil
}

// deleteChain removes an empty, unreferenced user chain, or every user
// chain when name is "" (each must be empty by then, and no built-in
// chain may still jump to one).
func (x *txn) deleteChain(name string) error {
	names := []string{name}
	if name == "" {
		names = x.t.userChains()
	}
	for _, n := range names {
		c, ok := x.t.chains[n]
		switch {
		case !ok:
			return fmt.Errorf("chain %q does not exist in table %s", n, x.t.name)
		case c.builtin:
			return fmt.Errorf("cannot delete built-in chain %s", n)
		case len(c.rules) > 0:
			return fmt.Errorf("chain %q is not empty", n)
		case x.t.refs[n] > 0:
			return fmt.Errorf("chain %q is still referenced by %d rules", n, x.t.refs[n])
		}
		delete(x.t.chains, n)
		delete(x.owned, n)
	}
	return nil
}

// check is the COMMIT-time safety net: every jump of a chain written in
// this transaction targets a chain that exists.
func (x *txn) check() error {
	for name := range x.owned {
		for _, r := range x.t.chains[name].rules {
			if target := chainTarget(r); target != "" {
				if _, ok := x.t.chains[target]; !ok {
					return fmt.Errorf("rule %q jumps to missing chain %q", r.String(), target)
				}
			}
		}
	}
	return nil
}
