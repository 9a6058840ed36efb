package iptablestest

import (
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// Dump returns a table as iptables-save prints it, minus the comment
// lines: built-in chains in hook order with their policy, user chains
// sorted, then every chain's rules in order. Unknown tables dump as "".
func (f *Fake) Dump(fam runner.Family, tableName string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return ""
	}
	return dumpTable(t)
}

// DumpAll returns every table of the family (filter, nat, mangle, raw).
func (f *Fake) DumpAll(fam runner.Family) string {
	var b strings.Builder
	for _, name := range tableNames() {
		b.WriteString(f.Dump(fam, name))
	}
	return b.String()
}

func dumpTable(t *table) string {
	var b strings.Builder
	b.WriteString("*" + t.name + "\n")
	order := t.chainOrder()
	for _, name := range order {
		c := t.chains[name]
		policy := "-"
		if c.builtin {
			policy = c.policy
		}
		b.WriteString(":" + name + " " + policy + " [0:0]\n")
	}
	for _, name := range order {
		for _, r := range t.chains[name].rules {
			b.WriteString(r.String() + "\n")
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// Rules returns copies of a chain's parsed rules, nil if it is absent.
func (f *Fake) Rules(fam runner.Family, tableName, chainName string) []Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return nil
	}
	c, ok := t.chains[chainName]
	if !ok {
		return nil
	}
	out := make([]Rule, len(c.rules))
	for i, r := range c.rules {
		out[i] = r.clone()
	}
	return out
}

// Chains returns a table's chains: built-ins in hook order, then user
// chains sorted.
func (f *Fake) Chains(fam runner.Family, tableName string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.tableLocked(fam, tableName)
	if err != nil {
		return nil
	}
	return t.chainOrder()
}
