package iptablestest

import (
	"fmt"
	"strings"
)

// validateTarget checks that the target exists here: a verdict, an
// extension valid in this table with the options it needs, or a user
// chain that exists now.
func (c ruleContext) validateTarget(r *Rule) error {
	switch {
	case r.Jump == "":
		return nil
	case verdict(r.Jump):
		if r.Goto {
			return fmt.Errorf("-g needs a chain, not %s", r.Jump)
		}
		return nil
	}
	if tables, ext := extensionTarget(r.Jump); ext {
		if r.Goto {
			return fmt.Errorf("-g needs a chain, not %s", r.Jump)
		}
		if tables != nil && !contains(tables, c.table.name) {
			return fmt.Errorf("target %s is not valid in table %s", r.Jump, c.table.name)
		}
		return validateTargetOptions(r)
	}
	ch, ok := c.table.chains[r.Jump]
	switch {
	case !ok:
		return fmt.Errorf("chain %q does not exist", r.Jump)
	case ch.builtin:
		return fmt.Errorf("cannot jump to built-in chain %s", r.Jump)
	}
	return nil
}

func validateTargetOptions(r *Rule) error {
	one := func(name string) (string, error) {
		o, ok := r.TargetOption(name)
		if !ok || len(o.Values) != 1 {
			return "", fmt.Errorf("%s needs %s", r.Jump, name)
		}
		return o.Values[0], nil
	}
	switch r.Jump {
	case "DNAT":
		dest, err := one("--to-destination")
		if err != nil {
			return err
		}
		if _, hasPort, err := parseNATDest(dest); err != nil {
			return err
		} else if hasPort && !portProtocol(r) {
			return fmt.Errorf("need TCP, UDP, SCTP or DCCP with port specification")
		}
	case "SNAT":
		_, err := one("--to-source")
		return err
	case "MARK":
		if len(r.TargetOptions) != 1 || len(r.TargetOptions[0].Values) != 1 {
			return fmt.Errorf("MARK needs exactly one of --set-xmark, --set-mark, --or-mark, --and-mark, --xor-mark")
		}
		_, _, err := parseMark(r.TargetOptions[0].Values[0])
		return err
	}
	return nil
}

func portProtocol(r *Rule) bool {
	if r.Protocol == nil || r.Protocol.Negated {
		return false
	}
	switch protocolName(r.Protocol.Value) {
	case "tcp", "udp", "sctp", "dccp":
		return true
	}
	return false
}

// chainTarget returns the user chain a rule jumps or goes to, or "".
func chainTarget(r *Rule) string {
	if r.Jump == "" || verdict(r.Jump) {
		return ""
	}
	if _, ext := extensionTarget(r.Jump); ext {
		return ""
	}
	return r.Jump
}

// isRange reports a "a-b" address or port range, which the fake does not
// model in NAT targets.
func isRange(s string) bool { return strings.Contains(s, "-") }
