package iptablestest

import (
	"errors"
	"fmt"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// ErrInjected is the cause of a Restore failed by FailNextRestores.
var ErrInjected = errors.New("iptablestest: injected failure")

func opError(op, tableName, chainName string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("iptablestest: %s %s/%s: %w", op, tableName, chainName, err)
}

// EnsureChain implements runner.Interface.
func (f *Fake) EnsureChain(fam runner.Family, tableName, chainName string) (bool, error) {
	existed := false
	err := f.update(fam, tableName, func(x *txn) error {
		if _, ok := x.t.chains[chainName]; ok {
			existed = true
			return nil
		}
		return x.newChain(chainName)
	})
	return existed, opError("ensure chain", tableName, chainName, err)
}

// ChainExists implements runner.Interface.
func (f *Fake) ChainExists(fam runner.Family, tableName, chainName string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return false, err
	}
	_, ok := t.chains[chainName]
	return ok, nil
}

// EnsureRule implements runner.Interface.
func (f *Fake) EnsureRule(fam runner.Family, pos runner.RulePosition, tableName, chainName string, args ...string) (bool, error) {
	existed := false
	err := f.update(fam, tableName, func(x *txn) error {
		idx, err := x.find(chainName, args)
		if err != nil || idx >= 0 {
			existed = idx >= 0
			return err
		}
		switch pos {
		case runner.Prepend:
			_, err = x.insert(chainName, 0, args)
		case runner.Append:
			_, err = x.insert(chainName, -1, args)
		default:
			err = fmt.Errorf("unknown rule position %q", pos)
		}
		return err
	})
	return existed, opError("ensure rule in", tableName, chainName, err)
}

// DeleteRule implements runner.Interface.
func (f *Fake) DeleteRule(fam runner.Family, tableName, chainName string, args ...string) error {
	err := f.update(fam, tableName, func(x *txn) error {
		if _, ok := x.t.chains[chainName]; !ok {
			return nil
		}
		idx, err := x.find(chainName, args)
		if err != nil || idx < 0 {
			return err
		}
		return x.deleteRule(chainName, args)
	})
	return opError("delete rule from", tableName, chainName, err)
}

// FlushChain implements runner.Interface.
func (f *Fake) FlushChain(fam runner.Family, tableName, chainName string) error {
	err := f.update(fam, tableName, func(x *txn) error {
		if _, ok := x.t.chains[chainName]; !ok {
			return nil
		}
		return x.flush(chainName)
	})
	return opError("flush chain", tableName, chainName, err)
}

// DeleteChain implements runner.Interface.
func (f *Fake) DeleteChain(fam runner.Family, tableName, chainName string) error {
	err := f.update(fam, tableName, func(x *txn) error {
		if _, ok := x.t.chains[chainName]; !ok {
			return nil
		}
		return x.deleteChain(chainName)
	})
	return opError("delete chain", tableName, chainName, err)
}
