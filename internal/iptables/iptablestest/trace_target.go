package iptablestest

import (
	"fmt"
	"net/netip"
	"strconv"
)

// apply runs a matched rule's target. It returns the paths that go on
// with the chain's next rule and the paths that left the chain.
func (t *tracer) apply(tbl *table, r *Rule, fl flow, depth int) ([]flow, []end, error) {
	switch r.Jump {
	case "", "LOG":
		return []flow{fl}, nil, nil
	case "ACCEPT", "DROP", "REJECT":
		fl.verdict = r.Jump
		return nil, []end{{fl: fl, terminal: true}}, nil
	case "RETURN":
		return nil, []end{{fl: fl}}, nil
	case "DNAT":
		return dnat(r, fl)
	case "REDIRECT":
		return t.redirect(r, fl)
	case "MASQUERADE", "SNAT":
		fl.masq = true
		return nil, []end{{fl: fl, terminal: true}}, nil
	case "MARK":
		var err error
		fl.mark, err = applyMark(r.TargetOptions[0], fl.mark)
		return []flow{fl}, nil, err
	}
	if chainTarget(r) == "" {
		return nil, nil, fmt.Errorf("iptablestest: trace: target %s is not modelled", r.Jump)
	}
	sub, err := t.walk(tbl, r.Jump, fl, depth+1)
	if err != nil {
		return nil, nil, err
	}
	var cont []flow
	var ends []end
	for _, e := range sub {
		switch {
		case e.terminal:
			ends = append(ends, e)
		case r.Goto: // returning from a -g chain returns from this one
			ends = append(ends, e)
		default:
			cont = append(cont, e.fl)
		}
	}
	return cont, ends, nil
}

func dnat(r *Rule, fl flow) ([]flow, []end, error) {
	o, _ := r.TargetOption("--to-destination")
	ap, hasPort, err := parseNATDest(o.Values[0])
	if err != nil {
		return nil, nil, err
	}
	if !hasPort {
		ap = netip.AddrPortFrom(ap.Addr(), fl.dport)
	}
	fl.dst, fl.dport, fl.dnat = ap.Addr(), ap.Port(), ap.String()
	return nil, []end{{fl: fl, terminal: true}}, nil
}

// redirect sends the packet to a local port: the node's own packets to
// loopback, arriving ones to the address of their input interface
// (Packet.RedirectAddr).
func (t *tracer) redirect(r *Rule, fl flow) ([]flow, []end, error) {
	port := fl.dport
	if o, ok := r.TargetOption("--to-ports"); ok {
		p, err := strconv.ParseUint(o.Values[0], 10, 16)
		if err != nil || p == 0 {
			return nil, nil, fmt.Errorf("REDIRECT --to-ports %q: only a single port is modelled", o.Values[0])
		}
		port = uint16(p)
	}
	fl.dst, fl.dport, fl.redirect = t.redirectAddr(), port, true
	fl.dnat = netip.AddrPortFrom(fl.dst, port).String()
	return nil, []end{{fl: fl, terminal: true}}, nil
}

// redirectAddr is where REDIRECT sends the traced packet.
func (t *tracer) redirectAddr() netip.Addr {
	is4 := t.pkt.DstIP.Is4()
	if !t.pkt.Local {
		if a := t.pkt.RedirectAddr; a.IsValid() {
			return a
		}
		for _, a := range t.pkt.NodeIPs {
			if a.Is4() == is4 && !a.IsLoopback() {
				return a
			}
		}
	}
	if is4 {
		return netip.MustParseAddr("127.0.0.1")
	}
	return netip.IPv6Loopback()
}

// applyMark applies a MARK target option to mark.
func applyMark(o Option, mark uint32) (uint32, error) {
	v, m, err := parseMark(o.Values[0])
	if err != nil {
		return 0, err
	}
	switch o.Name {
	case "--set-xmark":
		return (mark &^ m) ^ v, nil
	case "--set-mark":
		return (mark &^ m) | v, nil
	case "--or-mark":
		return mark | v, nil
	case "--and-mark":
		return mark & v, nil
	case "--xor-mark":
		return mark ^ v, nil
	}
	return 0, fmt.Errorf("MARK option %s is not modelled", o.Name)
}
