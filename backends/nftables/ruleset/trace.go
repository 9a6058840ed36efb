package ruleset

import (
	"fmt"
	"net/netip"
	"slices"
)

// TracePath is one possible fate of a new connection's first packet:
// random draws (numgen) and endpoint groups branch.
type TracePath struct {
	// Verdict is "accept", "drop" or "reject".
	Verdict string
	// DNAT is the endpoint the destination was rewritten to; zero if none.
	DNAT netip.AddrPort
	// Masquerade: nat postrouting masqueraded the connection.
	Masquerade bool
	// Probability is the chance that a new connection takes this path;
	// the paths of one trace add up to 1.
	Probability float64
	// Rules are the rules that matched, "chain: rule", in order.
	Rules []string
}

// TraceResult is every path of one traced packet, sorted by endpoint.
type TraceResult struct {
	Paths []TracePath
}

// maxTracePaths bounds the branching of random draws.
const maxTracePaths = 10000

// maxTraceDepth bounds nested jumps.
const maxTraceDepth = 16

// traceEnv adds the node's addresses to a table.
type traceEnv struct {
	*Table
	local []netip.Addr
}

// IsLocal implements Env.
func (e traceEnv) IsLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(e.local, a)
}

// tracePath is one path while it is traced.
type tracePath struct {
	pkt     Packet
	rules   []string
	prob    float64
	verdict string // "drop" or "reject" once refused; "accept" ends a base chain
	masq    bool
	dnat    netip.AddrPort
}

func (p tracePath) matched(chain, rule string) tracePath {
	p.rules = append(p.rules[:len(p.rules):len(p.rules)], chain+": "+rule)
	return p
}

// chainEnd is how a path left a chain: with a verdict or statement that
// ends it (terminal), or by returning to the caller.
type chainEnd struct {
	p        tracePath
	terminal bool
}

type tracer struct {
	env   traceEnv
	count int // paths made so far
}

// hook runs paths through the base chains of one hook, by priority. Paths
// refused stay refused; the others go on to the next base chain. Once a
// path is DNATed, its packet carries the endpoint as destination.
func (tr *tracer) hook(name string, paths []tracePath) ([]tracePath, error) {
	for _, c := range baseChains(tr.env.Table, name) {
		var next []tracePath
		for _, p := range paths {
			if p.verdict == "drop" || p.verdict == "reject" {
				next = append(next, p)
				continue
			}
			ends, err := tr.chain(c, p, 0)
			if err != nil {
				return nil, err
			}
			for _, e := range ends {
				next = append(next, e.p.afterBaseChain())
			}
		}
		paths = next
	}
	return paths, nil
}

// afterBaseChain readies a path for the next base chain.
func (p tracePath) afterBaseChain() tracePath {
	if p.verdict == "accept" {
		p.verdict = ""
	}
	if p.dnat.IsValid() && !p.pkt.DNATed {
		p.pkt.Daddr, p.pkt.Dport, p.pkt.DNATed = p.dnat.Addr(), p.dnat.Port(), true
	}
	return p
}

// baseChains lists the table's base chains on a hook, by priority.
func baseChains(t *Table, hook string) []*Chain {
	var out []*Chain
	for _, c := range t.Chains {
		if c.Hook != nil && c.Hook.Hook == hook {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *Chain) int { return a.Hook.Priority - b.Hook.Priority })
	return out
}

// chain runs one path through a chain's rules.
func (tr *tracer) chain(c *Chain, p tracePath, depth int) ([]chainEnd, error) {
	if depth > maxTraceDepth {
		return nil, fmt.Errorf("chain %s: jumps nested deeper than %d", c.Name, maxTraceDepth)
	}
	active, out := []tracePath{p}, []chainEnd(nil)
	for _, r := range c.Rules {
		var next []tracePath
		for _, cur := range active {
			cont, ends, err := tr.exprs(c, r, 0, cur, depth)
			if err != nil {
				return nil, fmt.Errorf("chain %s: %s: %w", c.Name, r.Text(tr.env.Family), err)
			}
			next, out = append(next, cont...), append(out, ends...)
		}
		active = next
	}
	for _, cur := range active {
		out = append(out, chainEnd{p: cur})
	}
	return out, nil
}

// exprs evaluates a rule's expressions from the i-th for one path. cont
// are the paths that go on with the chain's next rule, ends those that
// left the chain.
func (tr *tracer) exprs(c *Chain, r Rule, i int, p tracePath, depth int) (cont []tracePath, ends []chainEnd, err error) {
	if i == len(r.Exprs) {
		return []tracePath{p.matched(c.Name, r.Text(tr.env.Family))}, nil, nil
	}
	res, err := r.Exprs[i].Eval(&p.pkt, tr.env)
	if err != nil {
		return nil, nil, err
	}
	switch res.Outcome {
	case Break:
		return []tracePath{p}, nil, nil
	case Next:
		if !res.Maybe {
			return tr.exprs(c, r, i+1, p, depth)
		}
		if tr.count++; tr.count > maxTracePaths {
			return nil, nil, fmt.Errorf("more than %d paths", maxTracePaths)
		}
		hit, miss := p, p
		hit.prob, miss.prob = p.prob*res.Chance, p.prob*(1-res.Chance)
		cont, ends, err := tr.exprs(c, r, i+1, hit, depth)
		return append(cont, miss), ends, err
	}
	return tr.final(res, p.matched(c.Name, r.Text(tr.env.Family)), depth)
}

// final applies a verdict or terminal statement.
func (tr *tracer) final(res Result, p tracePath, depth int) ([]tracePath, []chainEnd, error) {
	switch {
	case res.Reject:
		p.verdict = "reject"
		return nil, []chainEnd{{p: p, terminal: true}}, nil
	case res.Masq:
		p.masq, p.verdict = true, "accept"
		return nil, []chainEnd{{p: p, terminal: true}}, nil
	case res.Targets != nil:
		return nil, dnatEnds(res, p), nil
	}
	switch vd := res.Verdict; vd.Kind {
	case "drop", "accept":
		p.verdict = vd.Kind
		return nil, []chainEnd{{p: p, terminal: true}}, nil
	case "return":
		return nil, []chainEnd{{p: p}}, nil
	}
	return tr.jump(*res.Verdict, p, depth)
}

// dnatEnds branches a path per endpoint, by the endpoint's share.
func dnatEnds(res Result, p tracePath) []chainEnd {
	var total float64
	for i := range res.Targets {
		total += share(res, i)
	}
	out := make([]chainEnd, 0, len(res.Targets))
	for i, ap := range res.Targets {
		q := p
		q.dnat, q.verdict, q.prob = ap, "accept", p.prob*share(res, i)/total
		out = append(out, chainEnd{p: q, terminal: true})
	}
	return out
}

func share(res Result, i int) float64 {
	if res.Weights == nil {
		return 1
	}
	return float64(res.Weights[i])
}

// jump runs the target chain: a path that returns from it goes on with
// the next rule after a jump, and leaves this chain too after a goto.
func (tr *tracer) jump(vd Verdict, p tracePath, depth int) ([]tracePath, []chainEnd, error) {
	target, ok := tr.env.Chains[vd.Chain]
	if !ok {
		return nil, nil, fmt.Errorf("%s to missing chain %s", vd.Kind, vd.Chain)
	}
	sub, err := tr.chain(target, p, depth+1)
	if err != nil {
		return nil, nil, err
	}
	var cont []tracePath
	var ends []chainEnd
	for _, e := range sub {
		if e.terminal || vd.Kind == "goto" {
			ends = append(ends, e)
			continue
		}
		cont = append(cont, e.p)
	}
	return cont, ends, nil
}

// result sums up the paths, sorted by endpoint then probability.
func (tr *tracer) result(paths []tracePath) TraceResult {
	out := TraceResult{Paths: make([]TracePath, 0, len(paths))}
	for _, p := range paths {
		v := p.verdict
		if v == "" {
			v = "accept"
		}
		out.Paths = append(out.Paths, TracePath{Verdict: v, DNAT: p.dnat, Masquerade: p.masq, Probability: p.prob, Rules: p.rules})
	}
	slices.SortStableFunc(out.Paths, func(a, b TracePath) int { return a.DNAT.Compare(b.DNAT) })
	return out
}
