package iptablestest

import (
	"fmt"
	"strconv"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// txn collects changes to one table on a copy; the fake installs the copy
// only when every change succeeded, so a failure changes nothing. Chains
// are copied the first time the transaction writes them.
type txn struct {
	ctx      ruleContext
	t        *table
	owned    map[string]bool
	declared map[string]bool
}

func newTxn(fam runner.Family, base *table) *txn {
	t := base.shallowCopy()
	return &txn{ctx: ruleContext{fam: fam, table: t}, t: t, owned: map[string]bool{}, declared: map[string]bool{}}
}

// chain returns the named chain for writing, or an error if it is absent.
func (x *txn) chain(name string) (*chain, error) {
	c, ok := x.t.chains[name]
	if !ok {
		return nil, fmt.Errorf("chain %q does not exist in table %s", name, x.t.name)
	}
	if !x.owned[name] {
		c = c.copy()
		x.t.chains[name] = c
		x.owned[name] = true
	}
	return c, nil
}

func (x *txn) ref(r *Rule, delta int) {
	if target := chainTarget(r); target != "" {
		x.t.refs[target] += delta
		if x.t.refs[target] == 0 {
			delete(x.t.refs, target)
		}
	}
}

// declare handles ":NAME POLICY [counters]": a built-in chain gets the
// policy; a user chain ("-" policy) is created, or flushed if it exists.
func (x *txn) declare(name, policy string) error {
	if x.declared[name] {
		return fmt.Errorf("chain %q declared twice", name)
	}
	x.declared[name] = true
	if c, ok := x.t.chains[name]; ok && c.builtin {
		return x.setPolicy(name, policy)
	}
	if policy != "-" {
		return fmt.Errorf("cannot set policy %q on user chain %q", policy, name)
	}
	if _, ok := x.t.chains[name]; ok {
		return x.flush(name)
	}
	return x.newChain(name)
}

func (x *txn) newChain(name string) error {
	if _, ok := x.t.chains[name]; ok {
		return fmt.Errorf("chain %q already exists", name)
	}
	if err := validChainName(name); err != nil {
		return err
	}
	x.t.chains[name] = &chain{name: name}
	x.owned[name] = true
	return nil
}

func (x *txn) setPolicy(name, policy string) error {
	c, err := x.chain(name)
	if err != nil {
		return err
	}
	if !c.builtin {
		return fmt.Errorf("cannot set policy on user chain %q", name)
	}
	if policy != "ACCEPT" && policy != "DROP" {
		return fmt.Errorf("bad policy %q for %s", policy, name)
	}
	c.policy = policy
	return nil
}

// insert parses and validates a rule and puts it at index pos (0-based;
// -1 appends).
func (x *txn) insert(chainName string, pos int, args []string) (*Rule, error) {
	c, err := x.chain(chainName)
	if err != nil {
		return nil, err
	}
	r, key, err := parseRule(chainName, args)
	if err != nil {
		return nil, err
	}
	if err := x.ctx.validate(r); err != nil {
		return nil, err
	}
	if pos < 0 {
		pos = len(c.rules)
	}
	if pos > len(c.rules) {
		return nil, fmt.Errorf("index of insertion too big")
	}
	c.rules = append(c.rules[:pos], append([]*Rule{r}, c.rules[pos:]...)...)
	c.keys = append(c.keys[:pos], append([]string{key}, c.keys[pos:]...)...)
	x.ref(r, 1)
	return r, nil
}

// find returns the index of the first rule equal to args, or -1.
func (x *txn) find(chainName string, args []string) (int, error) {
	c, ok := x.t.chains[chainName]
	if !ok {
		return -1, fmt.Errorf("chain %q does not exist in table %s", chainName, x.t.name)
	}
	_, key, err := parseRule(chainName, args)
	if err != nil {
		return -1, err
	}
	for i, have := range c.keys {
		if have == key {
			return i, nil
		}
	}
	return -1, nil
}

// deleteRule handles "-D CHAIN rulespec" and "-D CHAIN index".
func (x *txn) deleteRule(chainName string, args []string) error {
	idx, err := x.ruleIndex(chainName, args)
	if err != nil {
		return err
	}
	c, err := x.chain(chainName)
	if err != nil {
		return err
	}
	x.ref(c.rules[idx], -1)
	c.rules = append(c.rules[:idx], c.rules[idx+1:]...)
	c.keys = append(c.keys[:idx], c.keys[idx+1:]...)
	return nil
}

func (x *txn) ruleIndex(chainName string, args []string) (int, error) {
	if len(args) == 1 {
		if n, err := strconv.Atoi(args[0]); err == nil {
			c, ok := x.t.chains[chainName]
			if !ok {
				return -1, fmt.Errorf("chain %q does not exist in table %s", chainName, x.t.name)
			}
			if n < 1 || n > len(c.rules) {
				return -1, fmt.Errorf("index of deletion too big")
			}
			return n - 1, nil
		}
	}
	if r, _, err := parseRule(chainName, args); err != nil {
		return -1, err
	} else if err := x.ctx.validateTarget(r); err != nil {
		return -1, err
	}
	idx, err := x.find(chainName, args)
	if err == nil && idx < 0 {
		err = fmt.Errorf("bad rule (does a matching rule exist in that chain?)")
	}
	return idx, err
}
