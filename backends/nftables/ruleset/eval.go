package ruleset

import (
	"fmt"
	"net/netip"
	"strings"
)

// Packet is the first packet of a connection as the tracer sees it.
type Packet struct {
	Saddr, Daddr netip.Addr
	L4Proto      uint8
	Dport        uint16
	Mark         uint32
	// Iifname is the input interface; "" for the node's own packets.
	Iifname string
	// DNATed is set while tracing postrouting for a connection whose
	// destination was rewritten.
	DNATed bool
}

// field gives a packet field as a Value.
func (p *Packet) field(fl Field) (Value, error) {
	switch fl {
	case FieldSaddr:
		return Value{Addr: p.Saddr}, nil
	case FieldDaddr:
		return Value{Addr: p.Daddr}, nil
	case FieldL4Proto:
		return Value{Num: uint32(p.L4Proto)}, nil
	case FieldDport:
		return Value{Num: uint32(p.Dport)}, nil
	}
	return Value{}, fmt.Errorf("field %d is not a packet field", fl)
}

func (p *Packet) key(fs Fields) ([]Value, error) {
	out := make([]Value, len(fs))
	for i, fl := range fs {
		v, err := p.field(fl)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// Env is what the tracer knows besides the packet: the sets, and which
// addresses are the node's own.
type Env interface {
	// Lookup finds the element holding key (an interval set: the range
	// containing it).
	Lookup(set string, key []Value) (*Element, bool)
	// Elements lists a set's elements.
	Elements(set string) ([]Element, bool)
	IsLocal(a netip.Addr) bool
}

// Outcome says how evaluating an Expr ends.
type Outcome int

// Outcomes.
const (
	Next  Outcome = iota // matched: go on with the rule's next expression
	Break                // did not match: go on with the next rule
	Final                // a verdict or a terminal statement
)

// Result is the outcome of an Expr for one packet.
type Result struct {
	Outcome Outcome
	Verdict *Verdict         // jump, goto, return, drop, accept
	Reject  bool             // refused
	Masq    bool             // masqueraded
	Targets []netip.AddrPort // DNAT: the endpoints the connection may reach
	// Maybe marks a match that holds only sometimes (a random draw): the
	// tracer then follows both the rule and the rules after it. Chance is
	// the probability that it holds.
	Maybe  bool
	Chance float64
	// Weights, when set, are the shares of Targets (slots of an endpoint
	// group): a new connection goes to Targets[i] with probability
	// Weights[i] / sum(Weights). Unset: equal shares.
	Weights []uint32
}

func matched(ok bool) (Result, error) {
	if ok {
		return Result{Outcome: Next}, nil
	}
	return Result{Outcome: Break}, nil
}

// Eval implements Expr.
func (c Cmp) Eval(p *Packet, _ Env) (Result, error) {
	v, err := p.field(c.Field)
	if err != nil {
		return Result{}, err
	}
	var eq bool
	if c.Field == FieldSaddr || c.Field == FieldDaddr {
		eq = c.Prefix.Contains(v.Addr)
	} else {
		eq = v.Num == c.Num
	}
	return matched(eq != c.Neq)
}

// Eval implements Expr.
func (i IifName) Eval(p *Packet, _ Env) (Result, error) {
	eq := p.Iifname != "" && (p.Iifname == i.Name || i.Prefix && strings.HasPrefix(p.Iifname, i.Name))
	return matched(eq != i.Neq)
}

// Eval implements Expr.
func (l Lookup) Eval(p *Packet, env Env) (Result, error) {
	key, err := p.key(l.Key)
	if err != nil {
		return Result{}, err
	}
	_, found := env.Lookup(l.Set, key)
	return matched(found != l.Neq)
}

// Eval implements Expr.
func (v VMap) Eval(p *Packet, env Env) (Result, error) {
	key, err := p.key(v.Key)
	if err != nil {
		return Result{}, err
	}
	e, found := env.Lookup(v.Map, key)
	if !found {
		return Result{Outcome: Break}, nil
	}
	if e.Verdict == nil {
		return Result{}, fmt.Errorf("vmap @%s: element without verdict", v.Map)
	}
	return Result{Outcome: Final, Verdict: e.Verdict}, nil
}

// Eval implements Expr.
func (fl FibLocal) Eval(p *Packet, env Env) (Result, error) {
	a := p.Daddr
	if fl.Field == FieldSaddr {
		a = p.Saddr
	}
	return matched(env.IsLocal(a) != fl.Neq)
}

// Eval implements Expr: the tracer follows new, valid connections.
func (c CtState) Eval(*Packet, Env) (Result, error) { return matched(c.State == "new") }

// Eval implements Expr.
func (CtDNAT) Eval(p *Packet, _ Env) (Result, error) { return matched(p.DNATed) }

// Eval implements Expr.
func (m MarkClear) Eval(p *Packet, _ Env) (Result, error) { return matched(p.Mark&m.Bit == 0) }

// Eval implements Expr.
func (m MarkSet) Eval(p *Packet, _ Env) (Result, error) {
	if m.Xor {
		p.Mark ^= m.Bit
	} else {
		p.Mark |= m.Bit
	}
	return Result{Outcome: Next}, nil
}

// Eval implements Expr.
func (d Do) Eval(*Packet, Env) (Result, error) {
	v := Verdict(d)
	return Result{Outcome: Final, Verdict: &v}, nil
}

// Eval implements Expr.
func (Masquerade) Eval(*Packet, Env) (Result, error) {
	return Result{Outcome: Final, Masq: true}, nil
}

// Eval implements Expr.
func (Reject) Eval(*Packet, Env) (Result, error) {
	return Result{Outcome: Final, Reject: true}, nil
}

// Eval implements Expr: the endpoints whose slot ranges fall in the
// group. A group is either empty (the lookup misses: Break) or covers
// all of its SlotSpace slots; anything else is an error, since some
// connections would find no endpoint.
func (d DNAT) Eval(_ *Packet, env Env) (Result, error) {
	els, ok := env.Elements(d.Map)
	if !ok {
		return Result{}, fmt.Errorf("map @%s does not exist", d.Map)
	}
	lo, hi := d.Offset, d.Offset+SlotSpace-1
	var covered uint32
	seen := map[netip.AddrPort]int{}
	var targets []netip.AddrPort
	var weights []uint32
	for _, e := range els {
		a, b := e.Key[0].Num, e.KeyEnd[0].Num
		if b < lo || a > hi {
			continue
		}
		if a < lo || b > hi {
			return Result{}, fmt.Errorf("map @%s: range %d-%d crosses group %d-%d", d.Map, a, b, lo, hi)
		}
		covered += b - a + 1
		ap := netip.AddrPortFrom(e.Data[0].Addr, uint16(e.Data[1].Num))
		i, ok := seen[ap]
		if !ok {
			i = len(targets)
			seen[ap] = i
			targets, weights = append(targets, ap), append(weights, 0)
		}
		weights[i] += b - a + 1
	}
	switch covered {
	case 0:
		return Result{Outcome: Break}, nil
	case SlotSpace:
		return Result{Outcome: Final, Targets: targets, Weights: weights}, nil
	}
	return Result{}, fmt.Errorf("map @%s: group at %d covers %d of %d slots", d.Map, lo, covered, SlotSpace)
}

// Eval implements Expr: the tracer follows one new client; recording it
// changes nothing for that connection.
func (u Update) Eval(p *Packet, _ Env) (Result, error) {
	if _, err := p.key(u.Key); err != nil {
		return Result{}, err
	}
	return Result{Outcome: Next}, nil
}

// Eval implements Expr. The tracer reports every endpoint a connection
// may reach, so a random draw both matches (this rule's endpoint is
// possible) and lets the next rule's endpoints be possible too: see
// Result.Maybe.
func (n NumgenIs) Eval(*Packet, Env) (Result, error) {
	if n.Mod == 1 {
		return Result{Outcome: Next}, nil
	}
	return Result{Outcome: Next, Maybe: true, Chance: 1 / float64(n.Mod)}, nil
}

// Eval implements Expr.
func (d DNATTo) Eval(*Packet, Env) (Result, error) {
	return Result{Outcome: Final, Targets: []netip.AddrPort{d.Endpoint}}, nil
}
