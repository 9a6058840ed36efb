package iptablestest

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// tri is the outcome of matching a rule against a path.
type tri int

const (
	matchNo tri = iota
	matchYes
	matchMaybe // a random choice: both outcomes are traced
)

func negate(v bool, neg bool) tri {
	if v != neg {
		return matchYes
	}
	return matchNo
}

// match evaluates the rule's conditions in order and stops at the first
// that fails, so an unmodelled match only matters when it is reached.
func (t *tracer) match(r *Rule, fl flow) (tri, error) {
	if r.Protocol != nil && negate(protocolName(r.Protocol.Value) == t.pkt.Protocol || r.Protocol.Value == "all", r.Protocol.Negated) == matchNo {
		return matchNo, nil
	}
	if r.Source != nil && negate(inPrefix(r.Source.Value, t.pkt.SrcIP), r.Source.Negated) == matchNo {
		return matchNo, nil
	}
	if r.Destination != nil && negate(inPrefix(r.Destination.Value, fl.dst), r.Destination.Negated) == matchNo {
		return matchNo, nil
	}
	for _, iface := range []struct {
		v    *Value
		have string
	}{{r.InInterface, t.pkt.InInterface}, {r.OutInterface, t.pkt.OutInterface}} {
		if iface.v == nil {
			continue
		}
		if iface.have == "" && (iface.v != r.InInterface || !t.pkt.Local) {
			return matchNo, fmt.Errorf("rule matches an interface; set Packet.InInterface/OutInterface")
		}
		if negate(ifaceMatches(iface.v.Value, iface.have), iface.v.Negated) == matchNo {
			return matchNo, nil
		}
	}
	result := matchYes
	for _, m := range r.Matches {
		v, err := t.matchModule(m, fl)
		if err != nil || v == matchNo {
			return matchNo, err
		}
		if v == matchMaybe {
			result = matchMaybe
		}
	}
	return result, nil
}

func inPrefix(s string, a netip.Addr) bool {
	p, err := parseAddr(s)
	return err == nil && p.Contains(a)
}

func ifaceMatches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "+"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

func (t *tracer) matchModule(m Match, fl flow) (tri, error) {
	switch m.Module {
	case "comment":
		return matchYes, nil
	case "tcp", "udp", "sctp", "multiport":
		return t.matchPorts(m, fl)
	case "addrtype":
		return t.matchAddrType(m, fl)
	case "mark":
		o, _ := m.Option("--mark")
		v, mask, _ := parseMark(o.Values[0])
		return negate(fl.mark&mask == v, o.Negated), nil
	case "statistic":
		return matchStatistic(m)
	case "recent":
		return t.matchRecent(m)
	case "conntrack", "state":
		return matchCTState(m, fl)
	case "set":
		return t.matchSet(m, fl)
	}
	return matchNo, fmt.Errorf("match module %q is not modelled", m.Module)
}

func (t *tracer) matchPorts(m Match, fl flow) (tri, error) {
	for _, o := range m.Options {
		var ports []uint16
		switch o.Name {
		case "--dport", "--dports":
			ports = []uint16{fl.dport}
		case "--sport", "--sports":
			ports = []uint16{t.pkt.SrcPort}
		case "--ports":
			ports = []uint16{fl.dport, t.pkt.SrcPort}
		case "--syn":
			continue // the first packet of a NEW TCP connection is a SYN
		default:
			return matchNo, fmt.Errorf("%s %s is not modelled", m.Module, o.Name)
		}
		set, err := parsePortSet(o.Values[0])
		if err != nil {
			return matchNo, err
		}
		if negate(portIn(set, ports[0]) || (len(ports) > 1 && portIn(set, ports[1])), o.Negated) == matchNo {
			return matchNo, nil
		}
	}
	return matchYes, nil
}

func (t *tracer) matchAddrType(m Match, fl flow) (tri, error) {
	for _, o := range m.Options {
		var a netip.Addr
		switch o.Name {
		case "--dst-type":
			a = fl.dst
		case "--src-type":
			a = t.pkt.SrcIP
		default:
			return matchNo, fmt.Errorf("addrtype %s is not modelled", o.Name)
		}
		if o.Values[0] != "LOCAL" {
			return matchNo, fmt.Errorf("addrtype type %q is not modelled (only LOCAL)", o.Values[0])
		}
		if negate(t.isLocal(a), o.Negated) == matchNo {
			return matchNo, nil
		}
	}
	return matchYes, nil
}

func matchStatistic(m Match) (tri, error) {
	mode, _ := m.Option("--mode")
	var always, never bool
	var neg bool
	if mode.Values[0] == "random" {
		p, _ := m.Option("--probability")
		f, _ := strconv.ParseFloat(p.Values[0], 64)
		always, never, neg = f >= 1, f <= 0, p.Negated
	} else {
		every, _ := m.Option("--every")
		always, neg = len(every.Values) == 1 && every.Values[0] == "1", every.Negated
	}
	switch {
	case always:
		return negate(true, neg), nil
	case never:
		return negate(false, neg), nil
	}
	return matchMaybe, nil
}

// chance is the probability that r's random draw matches: "--mode
// random --probability p", or 1/n for "--mode nth --every n" (one in n
// connections); false when r draws nothing (a recent match).
func chance(r *Rule) (float64, bool) {
	m, ok := r.Match("statistic")
	if !ok {
		return 0, false
	}
	if o, ok := m.Option("--probability"); ok {
		p, err := strconv.ParseFloat(o.Values[0], 64)
		return negatedChance(p, o.Negated), err == nil
	}
	o, ok := m.Option("--every")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(o.Values[0])
	if err != nil || n <= 0 {
		return 0, false
	}
	return negatedChance(1/float64(n), o.Negated), true
}

func negatedChance(p float64, neg bool) float64 {
	if neg {
		return 1 - p
	}
	return p
}

func (t *tracer) matchRecent(m Match) (tri, error) {
	for _, o := range m.Options {
		switch o.Name {
		case "--set":
			return matchYes, nil // records the source; always matches
		case "--rcheck", "--update", "--remove":
			if t.pkt.RecentMayMatch {
				return matchMaybe, nil
			}
			return negate(false, o.Negated), nil
		}
	}
	return matchNo, fmt.Errorf("recent match without --set/--rcheck/--update/--remove")
}

// matchCTState: a traced packet starts a NEW connection; once DNATed its
// conntrack entry also has the DNAT status.
func matchCTState(m Match, fl flow) (tri, error) {
	for _, o := range m.Options {
		if o.Name != "--ctstate" && o.Name != "--state" {
			return matchNo, fmt.Errorf("%s %s is not modelled", m.Module, o.Name)
		}
		hit := false
		for _, s := range strings.Split(o.Values[0], ",") {
			hit = hit || s == "NEW" || (s == "DNAT" && fl.dnat != "")
		}
		if negate(hit, o.Negated) == matchNo {
			return matchNo, nil
		}
	}
	return matchYes, nil
}
