package iptablestest

import (
	"context"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

var _ runner.ChainLister = (*Fake)(nil)

// ListChain implements runner.ChainLister: the chain's rules as Dump
// prints them, or exists false when the chain is absent.
func (f *Fake) ListChain(ctx context.Context, fam runner.Family, tableName, chainName string) ([]string, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return nil, false, err
	}
	c, ok := t.chains[chainName]
	if !ok {
		return nil, false, nil
	}
	out := make([]string, len(c.rules))
	for i, r := range c.rules {
		out[i] = r.String()
	}
	return out, true, nil
}
