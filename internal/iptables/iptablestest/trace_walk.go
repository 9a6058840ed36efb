package iptablestest

import (
	"fmt"
	"net/netip"
	"strings"
)

// flow is the state of one path of the traced packet.
type flow struct {
	dst   netip.Addr
	dport uint16
	dnat  string
	// redirect: the destination was rewritten by REDIRECT (dnat holds
	// the local address and port).
	redirect bool
	mark     uint32
	masq     bool
	verdict  string // set when the path ends: ACCEPT, DROP, REJECT
	rules    []string
	// prob is the chance that a new connection takes this path: the
	// product of the random draws (-m statistic) it won or lost.
	prob float64
}

// matched returns a copy of fl that records r.
func (fl flow) matched(tableName string, r *Rule) flow {
	fl.rules = append(fl.rules[:len(fl.rules):len(fl.rules)], tableName+": "+r.String())
	return fl
}

// draw splits fl's probability between the path on which r matched and
// the one on which it did not, when r's match is a random draw.
func (fl flow) draw(r *Rule, m tri) (hit, miss flow) {
	hit, miss = fl, fl
	if m != matchMaybe {
		return hit, miss
	}
	if p, ok := chance(r); ok {
		hit.prob, miss.prob = fl.prob*p, fl.prob*(1-p)
	}
	return hit, miss
}

// end is how a path left a chain: terminal (a verdict, or a NAT target
// that ends the hook) or returned to the caller.
type end struct {
	fl       flow
	terminal bool
}

type tracer struct {
	tables map[string]*table
	pkt    Packet
	done   []flow // paths that ended in DROP or REJECT
	err    error  // first error; later work is skipped
}

func (t *tracer) isLocal(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	for _, n := range t.pkt.NodeIPs {
		if n == a {
			return true
		}
	}
	return false
}

func (t *tracer) splitLocal(flows []flow) (local, remote []flow) {
	for _, fl := range flows {
		if t.isLocal(fl.dst) {
			local = append(local, fl)
		} else {
			remote = append(remote, fl)
		}
	}
	return local, remote
}

// hooks runs flows through built-in chains ("table/CHAIN") in order and
// returns the flows every one of them let through.
func (t *tracer) hooks(flows []flow, chains ...string) []flow {
	for _, tc := range chains {
		tableName, chainName, _ := strings.Cut(tc, "/")
		var next []flow
		for _, fl := range flows {
			next = append(next, t.hook(tableName, chainName, fl)...)
		}
		flows = next
	}
	return flows
}

// hook runs one flow through a built-in chain, applying its policy to
// paths that fall off its end.
func (t *tracer) hook(tableName, chainName string, fl flow) []flow {
	if t.err != nil {
		return nil
	}
	tbl := t.tables[tableName]
	ends, err := t.walk(tbl, chainName, fl, 0)
	if err != nil {
		t.err = err
		return nil
	}
	var through []flow
	for _, e := range ends {
		if !e.terminal && tbl.chains[chainName].policy == "DROP" {
			e.fl.verdict = "DROP"
		}
		if e.fl.verdict == "DROP" || e.fl.verdict == "REJECT" {
			t.done = append(t.done, e.fl)
			continue
		}
		e.fl.verdict = ""
		through = append(through, e.fl)
	}
	return through
}

// walk runs a flow through one chain's rules and returns how each of its
// paths left the chain.
func (t *tracer) walk(tbl *table, chainName string, fl flow, depth int) ([]end, error) {
	if depth > maxTraceDepth {
		return nil, fmt.Errorf("iptablestest: trace: jumps nest deeper than %d (a loop?) at %s/%s", maxTraceDepth, tbl.name, chainName)
	}
	active, out := []flow{fl}, []end(nil)
	for _, r := range tbl.chains[chainName].rules {
		var next []flow
		for _, cur := range active {
			m, err := t.match(r, cur)
			if err != nil {
				return nil, fmt.Errorf("iptablestest: trace: %s: %s: %w", tbl.name, r.String(), err)
			}
			hit, miss := cur.draw(r, m)
			if m != matchYes {
				next = append(next, miss) // the path on which r did not match
			}
			if m == matchNo {
				continue
			}
			cont, ends, err := t.apply(tbl, r, hit.matched(tbl.name, r), depth)
			if err != nil {
				return nil, err
			}
			next, out = append(next, cont...), append(out, ends...)
		}
		if active = next; len(active)+len(out) > maxTracePaths {
			return nil, fmt.Errorf("iptablestest: trace: more than %d paths", maxTracePaths)
		}
	}
	for _, cur := range active {
		out = append(out, end{fl: cur})
	}
	return out, nil
}
