package testing

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// verdictOf is how a packet leaves one base chain.
type verdictOf struct {
	drop, reject, masq bool
	targets            []netip.AddrPort
}

// traceEnv adds the node's addresses to a table.
type traceEnv struct {
	*ruleset.Table
	local []netip.Addr
}

func (e traceEnv) IsLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(e.local, a)
}

// baseChains lists the table's base chains on a hook, by priority.
func baseChains(t *ruleset.Table, hook string) []*ruleset.Chain {
	var out []*ruleset.Chain
	for _, c := range t.Chains {
		if c.Hook != nil && c.Hook.Hook == hook {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *ruleset.Chain) int { return a.Hook.Priority - b.Hook.Priority })
	return out
}

// runChain evaluates a chain. It returns the terminal outcome, or nil
// when the chain returned (or fell off its end) without one.
func runChain(env traceEnv, c *ruleset.Chain, p *ruleset.Packet, depth int) (*verdictOf, error) {
	if depth > 16 {
		return nil, fmt.Errorf("chain %s: jumps nested deeper than 16", c.Name)
	}
	var maybe []netip.AddrPort // endpoints of rules that match by chance
	for _, r := range c.Rules {
		v, next, chance, err := runRule(env, r, p, depth)
		if err != nil {
			return nil, fmt.Errorf("chain %s: %s: %w", c.Name, r.Text(env.Family), err)
		}
		if chance && v != nil && v.targets != nil {
			maybe = append(maybe, v.targets...)
			continue
		}
		if v != nil && v.targets != nil {
			v.targets = append(maybe, v.targets...)
		}
		if v != nil || !next {
			return v, nil
		}
	}
	if maybe != nil {
		return &verdictOf{targets: maybe}, nil
	}
	return nil, nil
}

// runRule evaluates one rule: a terminal outcome, or next=true to go on
// with the chain's next rule (no match, or a jump that returned). chance
// says the rule matched only by a random draw.
func runRule(env traceEnv, r ruleset.Rule, p *ruleset.Packet, depth int) (v *verdictOf, next, chance bool, err error) {
	for _, e := range r.Exprs {
		res, err := e.Eval(p, env)
		if err != nil {
			return nil, false, false, err
		}
		chance = chance || res.Maybe
		switch res.Outcome {
		case ruleset.Next:
			continue
		case ruleset.Break:
			return nil, true, chance, nil
		}
		v, next, err := final(env, res, p, depth)
		return v, next, chance, err
	}
	return nil, true, chance, nil
}

func final(env traceEnv, res ruleset.Result, p *ruleset.Packet, depth int) (*verdictOf, bool, error) {
	switch {
	case res.Reject:
		return &verdictOf{reject: true}, false, nil
	case res.Masq:
		return &verdictOf{masq: true}, false, nil
	case res.Targets != nil:
		return &verdictOf{targets: res.Targets}, false, nil
	}
	vd := res.Verdict
	switch vd.Kind {
	case "drop":
		return &verdictOf{drop: true}, false, nil
	case "accept":
		return &verdictOf{}, false, nil
	case "return":
		return nil, false, nil
	}
	target, ok := env.Chains[vd.Chain]
	if !ok {
		return nil, false, fmt.Errorf("%s to missing chain %s", vd.Kind, vd.Chain)
	}
	sub, err := runChain(env, target, p, depth+1)
	if err != nil || sub != nil {
		return sub, false, err
	}
	// A jump that returns goes on with the next rule; a goto that
	// returns ends this chain too.
	return nil, vd.Kind == "jump", nil
}
