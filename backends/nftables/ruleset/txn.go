package ruleset

import "fmt"

// OpKind is the kind of one transaction operation.
type OpKind int

// Operations, named after the nft commands they correspond to.
const (
	OpAddTable OpKind = iota
	OpDeleteTable
	OpAddChain // creates the chain if missing ("add chain")
	OpFlushChain
	OpDeleteChain
	OpAddRule
	OpAddSet // creates the set if missing ("add set")
	OpFlushSet
	OpDeleteSet
	OpAddElements
	OpDeleteElements
)

var opNames = map[OpKind]string{
	OpAddTable: "add table", OpDeleteTable: "delete table", OpAddChain: "add chain",
	OpFlushChain: "flush chain", OpDeleteChain: "delete chain", OpAddRule: "add rule",
	OpAddSet: "add set", OpFlushSet: "flush set", OpDeleteSet: "delete set",
	OpAddElements: "add element", OpDeleteElements: "delete element",
}

func (k OpKind) String() string { return opNames[k] }

// Op is one operation. Which fields are set depends on Kind: Chain for
// OpAddChain, Name (the chain) and Rule for OpAddRule, Set for OpAddSet,
// Name (the set) and Elements for element operations, Name alone for
// flushes and deletions.
type Op struct {
	Kind     OpKind
	Name     string
	Chain    *Chain
	Rule     Rule
	Set      *Set
	Elements []Element
}

// String describes the operation for errors and logs.
func (o *Op) String() string {
	switch o.Kind {
	case OpAddChain:
		return fmt.Sprintf("%s %s", o.Kind, o.Chain.Name)
	case OpAddSet:
		return fmt.Sprintf("%s %s", o.Kind, o.Set.Name)
	case OpAddElements, OpDeleteElements:
		return fmt.Sprintf("%s %s (%d elements)", o.Kind, o.Name, len(o.Elements))
	case OpAddTable, OpDeleteTable:
		return o.Kind.String()
	}
	return fmt.Sprintf("%s %s", o.Kind, o.Name)
}

// Transaction is an ordered list of operations on one table, committed
// atomically: all of it takes effect or none.
type Transaction struct {
	Family Family
	Table  string
	Ops    []Op
	// disposable: nothing reads the operations' payloads after the
	// commit, so a committer may Release each once it has encoded it.
	disposable bool
	// released tallies the elements Release dropped, for Counts.
	released struct{ added, deleted int }
}

// SetDisposable marks a transaction nothing reads after its commit but
// Counts: a committer may then drop each operation's payload (rules,
// chains, sets, elements) once it has encoded it, so that a whole-table
// rewrite is not held twice, rendered and encoded, at its peak.
func (t *Transaction) SetDisposable() { t.disposable = true }

// Disposable tells whether Release is allowed.
func (t *Transaction) Disposable() bool { return t.disposable }

// Release drops operation i's payload (a rule's expressions, elements),
// keeping its kind, its name and its share of Counts. It does nothing
// unless the transaction is disposable.
func (t *Transaction) Release(i int) {
	if !t.disposable {
		return
	}
	o := &t.Ops[i]
	switch o.Kind {
	case OpAddRule:
		o.Rule = Rule{}
	case OpAddElements:
		t.released.added += len(o.Elements)
		o.Elements = nil
	case OpDeleteElements:
		t.released.deleted += len(o.Elements)
		o.Elements = nil
	}
}

// NewTransaction starts a transaction on table of family.
func NewTransaction(f Family, table string) *Transaction {
	return &Transaction{Family: f, Table: table}
}

// Len is the number of operations.
func (t *Transaction) Len() int { return len(t.Ops) }

// AddTable creates the table if it is missing.
func (t *Transaction) AddTable() { t.Ops = append(t.Ops, Op{Kind: OpAddTable}) }

// DeleteTable deletes the table and everything in it.
func (t *Transaction) DeleteTable() { t.Ops = append(t.Ops, Op{Kind: OpDeleteTable}) }

// AddChain creates the chain (without rules) if it is missing.
func (t *Transaction) AddChain(c *Chain) {
	t.Ops = append(t.Ops, Op{Kind: OpAddChain, Chain: &Chain{Name: c.Name, Hook: c.Hook}})
}

// FlushChain deletes every rule of a chain.
func (t *Transaction) FlushChain(name string) {
	t.Ops = append(t.Ops, Op{Kind: OpFlushChain, Name: name})
}

// DeleteChain deletes an empty, unreferenced chain.
func (t *Transaction) DeleteChain(name string) {
	t.Ops = append(t.Ops, Op{Kind: OpDeleteChain, Name: name})
}

// AddRule appends a rule to a chain.
func (t *Transaction) AddRule(chain string, r Rule) {
	t.Ops = append(t.Ops, Op{Kind: OpAddRule, Name: chain, Rule: r})
}

// AddSet creates the set if it is missing.
func (t *Transaction) AddSet(s *Set) { t.Ops = append(t.Ops, Op{Kind: OpAddSet, Set: s}) }

// FlushSet deletes every element of a set.
func (t *Transaction) FlushSet(name string) {
	t.Ops = append(t.Ops, Op{Kind: OpFlushSet, Name: name})
}

// DeleteSet deletes an unreferenced set.
func (t *Transaction) DeleteSet(name string) {
	t.Ops = append(t.Ops, Op{Kind: OpDeleteSet, Name: name})
}

// AddElements adds elements to a set; a key already present is an error.
// The set's definition travels with them: the kernel's encoding of a
// value depends on the field it belongs to.
func (t *Transaction) AddElements(set *Set, els []Element) {
	if len(els) > 0 {
		t.Ops = append(t.Ops, Op{Kind: OpAddElements, Name: set.Name, Set: set, Elements: els})
	}
}

// DeleteElements deletes elements, by key, from a set.
func (t *Transaction) DeleteElements(set *Set, els []Element) {
	if len(els) > 0 {
		t.Ops = append(t.Ops, Op{Kind: OpDeleteElements, Name: set.Name, Set: set, Elements: els})
	}
}

// Counts tallies the operations by kind, and elements added and deleted.
func (t *Transaction) Counts() (rules, elementsAdded, elementsDeleted int) {
	elementsAdded, elementsDeleted = t.released.added, t.released.deleted
	for i := range t.Ops {
		switch o := &t.Ops[i]; o.Kind {
		case OpAddRule:
			rules++
		case OpAddElements:
			elementsAdded += len(o.Elements)
		case OpDeleteElements:
			elementsDeleted += len(o.Elements)
		}
	}
	return rules, elementsAdded, elementsDeleted
}
