package ipvstest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

var builtinChains = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

// expandedRules copies the filter and nat tables of the iptables fake
// into a new fake, with every "-m set --match-set" match replaced by one
// rule per member of the set (plain -s/-d/-p/--dport matches), so the
// iptables tracer, which does not model sets, can walk them.
func (k *Kernel) expandedRules(fam runner.Family) (*iptablestest.Fake, error) {
	var b strings.Builder
	for _, table := range []string{"filter", "nat"} {
		b.WriteString("*" + table + "\n")
		chains := k.IPTables.Chains(fam, table)
		for _, c := range chains {
			if !slices.Contains(builtinChains[table], c) {
				b.WriteString(":" + c + " - [0:0]\n")
			}
		}
		for _, c := range chains {
			for _, r := range k.IPTables.Rules(fam, table, c) {
				expanded, err := k.expandArgs(r.Args, r.Protocol)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", table, r.String(), err)
				}
				for _, args := range expanded {
					b.WriteString("-A " + c + " " + joinArgs(args) + "\n")
				}
			}
		}
		b.WriteString("COMMIT\n")
	}
	scratch := iptablestest.NewFake()
	if err := scratch.Restore(context.Background(), fam, []byte(b.String())); err != nil {
		return nil, fmt.Errorf("expanded rules: %w", err)
	}
	return scratch, nil
}

// expandArgs replaces the first set match of a rule by one variant per
// set member, recursively; a rule without set match is returned as is.
func (k *Kernel) expandArgs(args []string, proto *iptablestest.Value) ([][]string, error) {
	i := slices.Index(args, "set")
	if i < 1 || args[i-1] != "-m" {
		return [][]string{args}, nil
	}
	j := i + 1
	if j < len(args) && args[j] == "!" {
		return nil, fmt.Errorf("negated set matches are not modelled")
	}
	if j+2 >= len(args) || args[j] != "--match-set" {
		return nil, fmt.Errorf("set match without --match-set NAME FLAGS")
	}
	name, flags := args[j+1], strings.Split(args[j+2], ",")
	set, ok := k.IPSet.Set(name)
	if !ok {
		return nil, fmt.Errorf("set %s does not exist", name)
	}
	var out [][]string
	for _, member := range k.IPSet.Entries(name) {
		extra, ok, err := memberMatch(set.Type, member, flags, args, proto)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		variant := slices.Concat(args[:i-1], extra, args[j+3:])
		more, err := k.expandArgs(variant, proto)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// memberMatch turns one set member into plain matches. ok is false when
// the member can never match the rule (another protocol).
func memberMatch(setType, member string, flags, args []string, proto *iptablestest.Value) ([]string, bool, error) {
	e, err := ipset.ParseEntry(setType, member)
	if err != nil {
		return nil, false, err
	}
	dims := map[string][]string{ // dimensions of each type, in order
		ipset.HashIP: {"ip"}, ipset.HashIPPort: {"ip", "port"}, ipset.HashIPPortIP: {"ip", "port", "ip2"},
		ipset.HashIPPortNet: {"ip", "port", "net"}, ipset.BitmapPort: {"port"},
	}[setType]
	if len(flags) != len(dims) {
		return nil, false, fmt.Errorf("flags %v do not fit %s", flags, setType)
	}
	var extra []string
	for d, dim := range dims {
		dir := flags[d]
		if dir != "src" && dir != "dst" {
			return nil, false, fmt.Errorf("bad set flag %q", dir)
		}
		m, ok, err := dimensionMatch(dim, dir, e, args, proto)
		if err != nil || !ok {
			return nil, ok, err
		}
		extra = append(extra, m...)
	}
	return extra, true, nil
}

func dimensionMatch(dim, dir string, e ipset.Entry, args []string, proto *iptablestest.Value) ([]string, bool, error) {
	addrOpt := map[string]string{"src": "-s", "dst": "-d"}[dir]
	addr := func(p netip.Prefix) ([]string, bool, error) {
		if slices.Contains(args, addrOpt) {
			return nil, false, fmt.Errorf("rule has %s and a set match on it: not modelled", addrOpt)
		}
		return []string{addrOpt, p.String()}, true, nil
	}
	switch dim {
	case "ip":
		return addr(netip.PrefixFrom(e.IP, e.IP.BitLen()))
	case "ip2":
		return addr(netip.PrefixFrom(e.IP2, e.IP2.BitLen()))
	case "net":
		return addr(e.Net)
	}
	p := e.Proto
	var m []string
	switch {
	case p == "" && proto == nil:
		return nil, false, fmt.Errorf("port set match without -p")
	case p == "":
		p = proto.Value
	case proto != nil && (proto.Value != p) != proto.Negated:
		return nil, false, nil // the rule is for another protocol
	case proto == nil:
		m = []string{"-p", p}
	}
	portOpt := map[string]string{"src": "--sport", "dst": "--dport"}[dir]
	return append(m, "-m", p, portOpt, strconv.Itoa(int(e.Port))), true, nil
}

// joinArgs quotes arguments with blanks for iptables-restore.
func joinArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"\\") {
			a = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(a) + `"`
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
