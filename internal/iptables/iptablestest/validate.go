package iptablestest

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// maxChainName is the longest chain name iptables accepts
// (XT_EXTENSION_MAXNAMELEN - 1).
const maxChainName = 28

func validChainName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty chain name")
	case len(name) > maxChainName:
		return fmt.Errorf("chain name %q longer than %d characters", name, maxChainName)
	case strings.ContainsAny(name, " \t\"'!") || name[0] == '-':
		return fmt.Errorf("invalid chain name %q", name)
	case verdict(name):
		return fmt.Errorf("chain name %q is a verdict", name)
	}
	if _, ext := extensionTarget(name); ext {
		return fmt.Errorf("chain name %q is a target", name)
	}
	return nil
}

// ruleContext is what validating a rule needs to know about its table.
type ruleContext struct {
	fam   runner.Family
	table *table
}

func (c ruleContext) validate(r *Rule) error {
	if err := c.validateAddrs(r); err != nil {
		return err
	}
	if r.Protocol != nil && !knownProtocol(r.Protocol.Value) {
		return fmt.Errorf("unknown protocol %q", r.Protocol.Value)
	}
	for _, m := range r.Matches {
		if err := validateMatch(r, m); err != nil {
			return err
		}
	}
	return c.validateTarget(r)
}

func (c ruleContext) validateAddrs(r *Rule) error {
	for _, v := range []*Value{r.Source, r.Destination} {
		if v == nil {
			continue
		}
		if strings.Contains(v.Value, ",") {
			return fmt.Errorf("address lists (%q) are not modelled", v.Value)
		}
		p, err := parseAddr(v.Value)
		if err != nil {
			return fmt.Errorf("host/network %q not found", v.Value)
		}
		if p.Addr().Is4() != (c.fam == runner.IPv4) {
			return fmt.Errorf("host/network %q is not %s", v.Value, c.fam)
		}
	}
	return nil
}

func knownProtocol(p string) bool {
	switch protocolName(p) {
	case "tcp", "udp", "sctp", "icmp", "icmpv6", "all", "udplite", "esp", "ah", "gre":
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 0 && n <= 255
}

// flagOptions are the options of known modules that take no value.
func flagOption(name string) bool {
	switch name {
	case "--syn", "--set", "--rcheck", "--update", "--remove", "--reap", "--rsource", "--rdest",
		"--rttl", "--limit-iface-in", "--limit-iface-out", "--return-nomatch", "--update-counters", "--update-subcounters":
		return true
	}
	return false
}

func validateMatch(r *Rule, m Match) error {
	if knownModule(m.Module) {
		for _, o := range m.Options {
			want := 1
			switch {
			case flagOption(o.Name):
				want = 0
			case o.Name == "--tcp-flags", o.Name == "--match-set":
				want = 2
			}
			if len(o.Values) != want {
				return fmt.Errorf("%s %s takes %d value(s), got %q", m.Module, o.Name, want, o.Values)
			}
		}
	}
	switch m.Module {
	case "tcp", "udp", "sctp":
		if r.Protocol == nil || r.Protocol.Negated || protocolName(r.Protocol.Value) != m.Module {
			return fmt.Errorf("%s match needs -p %s", m.Module, m.Module)
		}
		return validatePorts(m, "--dport", "--sport")
	case "multiport":
		return validatePorts(m, "--dports", "--sports", "--ports")
	case "comment":
		if o, ok := m.Option("--comment"); !ok || len(o.Values) != 1 || len(o.Values[0]) > 256 {
			return fmt.Errorf("comment match needs one --comment of at most 256 characters")
		}
	case "statistic":
		return validateStatistic(m)
	case "mark":
		o, ok := m.Option("--mark")
		if !ok || len(o.Values) != 1 {
			return fmt.Errorf("mark match needs --mark value[/mask]")
		}
		_, _, err := parseMark(o.Values[0])
		return err
	}
	return nil
}

func validatePorts(m Match, names ...string) error {
	for _, o := range m.Options {
		if !contains(names, o.Name) {
			continue
		}
		if len(o.Values) != 1 {
			return fmt.Errorf("%s needs one value", o.Name)
		}
		if _, err := parsePortSet(o.Values[0]); err != nil {
			return fmt.Errorf("%s %q: %w", o.Name, o.Values[0], err)
		}
	}
	return nil
}

func validateStatistic(m Match) error {
	mode, ok := m.Option("--mode")
	if !ok || len(mode.Values) != 1 {
		return fmt.Errorf("statistic match needs --mode")
	}
	switch mode.Values[0] {
	case "random":
		p, ok := m.Option("--probability")
		if !ok || len(p.Values) != 1 {
			return fmt.Errorf("statistic --mode random needs --probability")
		}
		if f, err := strconv.ParseFloat(p.Values[0], 64); err != nil || f < 0 || f > 1 {
			return fmt.Errorf("bad --probability %q", p.Values[0])
		}
	case "nth":
		if _, ok := m.Option("--every"); !ok {
			return fmt.Errorf("statistic --mode nth needs --every")
		}
	default:
		return fmt.Errorf("bad statistic mode %q", mode.Values[0])
	}
	return nil
}
