package iptablestest

import (
	"sort"
)

// builtinChains lists a table's built-in chains in hook order (the order
// iptables-save prints them); nil for a table the fake does not model.
func builtinChains(table string) []string {
	switch table {
	case "filter":
		return []string{"INPUT", "FORWARD", "OUTPUT"}
	case "nat":
		return []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}
	case "mangle":
		return []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
	case "raw":
		return []string{"PREROUTING", "OUTPUT"}
	}
	return nil
}

// tableNames are the modelled tables, in the order Dump-all prints them.
func tableNames() []string { return []string{"filter", "nat", "mangle", "raw"} }

type chain struct {
	name    string
	builtin bool
	policy  string // built-in chains only: ACCEPT or DROP
	rules   []*Rule
	keys    []string // ruleKey of each rule, same index
}

func (c *chain) copy() *chain {
	n := *c
	n.rules = append([]*Rule(nil), c.rules...)
	n.keys = append([]string(nil), c.keys...)
	return &n
}

// table is one table of one family. Rules are immutable and shared between
// copies; chains are copied on write (see txn).
type table struct {
	name   string
	chains map[string]*chain
	refs   map[string]int // user chain -> rules that jump or go to it
}

func newTable(name string) *table {
	t := &table{name: name, chains: map[string]*chain{}, refs: map[string]int{}}
	for _, c := range builtinChains(name) {
		t.chains[c] = &chain{name: c, builtin: true, policy: "ACCEPT"}
	}
	return t
}

// shallowCopy shares the chains; the caller copies a chain before writing.
func (t *table) shallowCopy() *table {
	n := &table{name: t.name, chains: make(map[string]*chain, len(t.chains)), refs: make(map[string]int, len(t.refs))}
	for k, v := range t.chains {
		n.chains[k] = v
	}
	for k, v := range t.refs {
		n.refs[k] = v
	}
	return n
}

// userChains returns the table's user-defined chains, sorted.
func (t *table) userChains() []string {
	var names []string
	for name, c := range t.chains {
		if !c.builtin {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// chainOrder is built-ins in hook order, then user chains sorted.
func (t *table) chainOrder() []string {
	return append(append([]string(nil), builtinChains(t.name)...), t.userChains()...)
}
