package ruleset

import (
	"net/netip"
	"testing"
)

// Release drops payloads only of a disposable transaction, and Counts
// stays what it was before.
func TestReleaseKeepsCounts(t *testing.T) {
	set := &Set{Name: "s", Key: Fields{FieldDaddr}}
	el := Element{Key: []Value{{Addr: netip.MustParseAddr("10.0.0.1")}}}
	build := func() *Transaction {
		tx := NewTransaction(IPv4, "t")
		tx.AddRule("c", Rule{Comment: "r"})
		tx.AddElements(set, []Element{el, el})
		tx.DeleteElements(set, []Element{el})
		return tx
	}
	kept := build()
	for i := range kept.Ops {
		kept.Release(i)
	}
	if kept.Ops[0].Rule.Comment != "r" || len(kept.Ops[1].Elements) != 2 {
		t.Error("Release dropped the payload of a transaction that is not disposable")
	}
	tx := build()
	r0, a0, d0 := tx.Counts()
	tx.SetDisposable()
	for i := range tx.Ops {
		tx.Release(i)
	}
	if tx.Ops[0].Rule.Comment != "" || tx.Ops[1].Elements != nil || tx.Ops[2].Elements != nil {
		t.Error("Release kept a payload of a disposable transaction")
	}
	if r, a, d := tx.Counts(); r != r0 || a != a0 || d != d0 {
		t.Errorf("Counts after Release = %d, %d, %d; before %d, %d, %d", r, a, d, r0, a0, d0)
	}
}
