package iptablestest

import (
	"context"
	"fmt"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

var (
	_ runner.RuleCounter    = (*Fake)(nil)
	_ runner.ChainUseReader = (*Fake)(nil)
)

// CountRules implements runner.RuleCounter: every chain's rule count and
// the jumps of the built-in chains, with the nf_tables use counts in
// nf_tables mode.
func (f *Fake) CountRules(ctx context.Context, fam runner.Family, tableName string) (*runner.TableCounts, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return nil, err
	}
	out := countChains(t, t.chainOrder())
	if f.mode == runner.ModeNFT {
		out.Uses = uses(t)
	}
	return out, nil
}

// ChainUses implements runner.ChainUseReader like nf_tables: a chain's
// rules plus the rules jumping or going to it. It fails in legacy mode,
// as the real runner does.
func (f *Fake) ChainUses(ctx context.Context, fam runner.Family) (map[string]map[string]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mode != runner.ModeNFT {
		return nil, fmt.Errorf("iptablestest: chain use counts need nf_tables mode")
	}
	out := map[string]map[string]int{}
	for _, name := range tableNames() {
		t, err := f.tableLocked(fam, name)
		if err != nil {
			return nil, err
		}
		out[name] = uses(t)
	}
	return out, nil
}

// CountChainRules implements runner.ChainUseReader.
func (f *Fake) CountChainRules(ctx context.Context, fam runner.Family, tableName string, chains []string) (*runner.TableCounts, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mode != runner.ModeNFT {
		return nil, fmt.Errorf("iptablestest: per-chain counts need nf_tables mode")
	}
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return nil, err
	}
	return countChains(t, chains), nil
}

func countChains(t *table, names []string) *runner.TableCounts {
	out := &runner.TableCounts{Rules: map[string]int{}, Jumps: map[string][]string{}}
	for _, name := range names {
		c, ok := t.chains[name]
		if !ok {
			continue
		}
		out.Rules[name] = len(c.rules)
		if !c.builtin {
			continue
		}
		for _, r := range c.rules {
			if _, user := t.chains[r.Jump]; user && !t.chains[r.Jump].builtin {
				out.Jumps[name] = append(out.Jumps[name], r.Jump)
			}
		}
	}
	return out
}

func uses(t *table) map[string]int {
	out := make(map[string]int, len(t.chains))
	for name, c := range t.chains {
		out[name] = len(c.rules) + t.refs[name]
	}
	return out
}
