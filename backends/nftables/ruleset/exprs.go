package ruleset

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables/expr"
)

// Expr is one match or statement of a rule. Text is its nft syntax,
// Compile its netlink expressions, Eval its meaning for the packet tracer.
type Expr interface {
	Text(f Family) string
	Compile(f Family) ([]expr.Any, error)
	Eval(p *Packet, env Env) (Result, error)
}

// Cmp compares one packet field with a value: an address prefix for
// FieldSaddr/FieldDaddr, a number for FieldL4Proto/FieldDport.
type Cmp struct {
	Field  Field
	Neq    bool
	Prefix netip.Prefix
	Num    uint32
}

// Text gives e.g. "ip saddr != 10.0.0.0/8" or "th dport 80".
func (c Cmp) Text(f Family) string {
	op := " "
	if c.Neq {
		op = " != "
	}
	val := Value{Num: c.Num}.Text(c.Field)
	if c.Field == FieldSaddr || c.Field == FieldDaddr {
		val = c.Prefix.String()
		if c.Prefix.IsSingleIP() {
			val = c.Prefix.Addr().String()
		}
	}
	return c.Field.Text(f) + op + val
}

// Lookup matches when the concatenated fields are (or with Neq, are not)
// an element of a set.
type Lookup struct {
	Key Fields
	Set string
	Neq bool
}

// Text gives e.g. "ip daddr . meta l4proto . th dport @services-without-endpoints".
func (l Lookup) Text(f Family) string {
	op := " @"
	if l.Neq {
		op = " != @"
	}
	return l.Key.Text(f) + op + l.Set
}

// VMap dispatches on a verdict map: a miss continues with the next rule.
type VMap struct {
	Key Fields
	Map string
}

// Text gives e.g. "ip daddr . meta l4proto . th dport vmap @service-ips".
func (v VMap) Text(f Family) string { return v.Key.Text(f) + " vmap @" + v.Map }

// FibLocal matches when the source (or destination) address is one of the
// node's own (fib ... type local).
type FibLocal struct {
	Field Field // FieldSaddr or FieldDaddr
	Neq   bool
}

// Text gives "fib daddr type local".
func (fl FibLocal) Text(Family) string {
	which := "daddr"
	if fl.Field == FieldSaddr {
		which = "saddr"
	}
	op := " "
	if fl.Neq {
		op = " != "
	}
	return "fib " + which + " type" + op + "local"
}

// CtState matches the conntrack state "new" or "invalid".
type CtState struct{ State string }

// Text gives "ct state new".
func (c CtState) Text(Family) string { return "ct state " + c.State }

// CtDNAT matches connections whose destination was NATed.
type CtDNAT struct{}

// Text gives "ct status dnat".
func (CtDNAT) Text(Family) string { return "ct status dnat" }

// MarkClear matches packets whose mark has the bit clear.
type MarkClear struct{ Bit uint32 }

// Text gives "meta mark & 0x00004000 == 0x00000000".
func (m MarkClear) Text(Family) string {
	return fmt.Sprintf("meta mark & %#08x == 0", m.Bit)
}

// MarkSet sets (or, with Xor, toggles) a bit of the packet mark.
type MarkSet struct {
	Bit uint32
	Xor bool
}

// Text gives "meta mark set meta mark | 0x00004000".
func (m MarkSet) Text(Family) string {
	op := "|"
	if m.Xor {
		op = "^"
	}
	return fmt.Sprintf("meta mark set meta mark %s %#08x", op, m.Bit)
}

// Do is a verdict statement: jump, goto, return, drop or accept.
type Do Verdict

// Text gives "goto chain".
func (d Do) Text(Family) string { return Verdict(d).Text() }

// Masquerade rewrites the source to the outgoing interface's address.
// FullyRandom picks every connection's source port at random; without it
// the connection keeps its own source port where that port is free.
type Masquerade struct{ FullyRandom bool }

// Text gives "masquerade" or "masquerade fully-random".
func (m Masquerade) Text(Family) string {
	if m.FullyRandom {
		return "masquerade fully-random"
	}
	return "masquerade"
}

// Reject refuses the packet: a TCP reset, or ICMP port unreachable.
type Reject struct{ TCPReset bool }

// Text gives "reject with tcp reset" or "reject".
func (r Reject) Text(Family) string {
	if r.TCPReset {
		return "reject with tcp reset"
	}
	return "reject"
}

// DNAT picks a slot of an endpoint group at random and DNATs to the
// endpoint the group's interval map holds for it:
// "dnat ip to numgen random mod 65536 offset O map @endpoints-P".
// Groups share maps (see the backend): Offset is the group's first slot.
// Group names the group itself; it does not change the statement, and goes
// into the tag of the chain holding the rule (ChainTag), so that a restart
// can keep the identifiers the table was written with.
type DNAT struct {
	Map    string
	Offset uint32
	Group  GroupRef
}

// GroupRef identifies an endpoint group: its identifier, how many
// groups share a map (Width, zero when unknown) and whether it holds the
// port's node-local endpoints.
type GroupRef struct {
	ID, Width uint32
	Local     bool
}

// Text gives the nft statement.
func (d DNAT) Text(f Family) string {
	return fmt.Sprintf("dnat %s to %s map @%s", f, slotText(d.Offset), d.Map)
}

func slotText(offset uint32) string {
	if offset == 0 {
		return fmt.Sprintf("numgen random mod %d", SlotSpace)
	}
	return fmt.Sprintf("numgen random mod %d offset %d", SlotSpace, offset)
}

// Update adds the key to a dynamic set with a timeout, or refreshes the
// timeout of an element already there: "update @sticky-X { ip saddr
// timeout 10800s }".
type Update struct {
	Set     string
	Key     Fields
	Timeout uint32 // seconds
}

// Text gives the nft statement.
func (u Update) Text(f Family) string {
	return fmt.Sprintf("update @%s { %s timeout %ds }", u.Set, u.Key.Text(f), u.Timeout)
}

// NumgenIs matches with probability 1/Mod: "numgen random mod 3 0". A
// run of rules with Mod n, n-1, ..., 1 picks each of n endpoints with
// probability 1/n, as kube-proxy's iptables statistic rules do.
type NumgenIs struct{ Mod uint32 }

// Text gives the nft match.
func (n NumgenIs) Text(Family) string { return fmt.Sprintf("numgen random mod %d 0", n.Mod) }

// DNATTo DNATs to one endpoint: "dnat ip to 10.244.1.2:8080".
type DNATTo struct{ Endpoint netip.AddrPort }

// Text gives the nft statement.
func (d DNATTo) Text(f Family) string { return fmt.Sprintf("dnat %s to %s", f, d.Endpoint) }

// IifName matches the interface the packet came in on: its name, or with
// Prefix any name that starts with Name ("iifname "cali*"", kube-proxy's
// match for --detect-local-mode InterfaceNamePrefix). The node's own
// packets have no input interface: IifName never matches them, and with
// Neq always does.
type IifName struct {
	Name   string
	Prefix bool
	Neq    bool
}

// Text gives e.g. `iifname "cbr0"` or `iifname != "cali*"`.
func (i IifName) Text(Family) string {
	op := " "
	if i.Neq {
		op = " != "
	}
	name := i.Name
	if i.Prefix {
		name += "*"
	}
	return "iifname" + op + fmt.Sprintf("%q", name)
}
