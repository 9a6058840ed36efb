package iptablestest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// base is the state every strictness case starts from.
const base = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A - [0:0]
-A KUBE-SEP-A -p tcp -j DNAT --to-destination 10.244.1.2:80
-A KUBE-SVC-A -j KUBE-SEP-A
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 80 -j KUBE-SVC-A
-A PREROUTING -j KUBE-SERVICES
COMMIT
`

// strictCase is a payload the fake rejects (on top of base). realAccepts
// names the iptables modes that accept it anyway: where the fake is
// stricter, because such a payload is a renderer bug.
type strictCase struct {
	name        string
	data        string
	wantLine    int
	wantErr     string
	realAccepts []string
}

func strictCases() []strictCase {
	both := []string{"nf_tables", "legacy"}
	return []strictCase{
		{"jump to an undefined chain", "*nat\n:KUBE-SVC-A - [0:0]\n-A KUBE-SVC-A -j KUBE-SEP-NOPE\nCOMMIT\n", 3, `chain "KUBE-SEP-NOPE" does not exist`, nil},
		{"goto an undefined chain", "*nat\n-A KUBE-SERVICES -g NOPE\nCOMMIT\n", 2, "does not exist", nil},
		{"goto a verdict", "*nat\n-A KUBE-SERVICES -g RETURN\nCOMMIT\n", 2, "needs a chain", nil},
		{"jump to a chain declared later", "*nat\n:A1 - [0:0]\n-A A1 -j B1\n:B1 - [0:0]\nCOMMIT\n", 3, "does not exist", nil},
		{"rule in an unknown chain", "*nat\n-A NOPE -j RETURN\nCOMMIT\n", 2, "does not exist", nil},
		{"delete a referenced chain", "*nat\n:KUBE-SEP-A - [0:0]\n-X KUBE-SEP-A\nCOMMIT\n", 3, "still referenced", nil},
		{"delete a non-empty chain", "*nat\n-X KUBE-SEP-A\nCOMMIT\n", 2, "not empty", nil},
		{"delete a built-in chain", "*nat\n-X PREROUTING\nCOMMIT\n", 2, "built-in", nil},
		{"duplicate declaration", "*nat\n:X - [0:0]\n-A X -j RETURN\n:X - [0:0]\nCOMMIT\n", 4, "declared twice", both},
		{"create an existing chain", "*nat\n-N KUBE-SVC-A\nCOMMIT\n", 2, "already exists", nil},
		{"chain named like a target", "*nat\n:ACCEPT - [0:0]\nCOMMIT\n", 2, "verdict", nil},
		{"user chain with a policy", "*nat\n:X ACCEPT [0:0]\nCOMMIT\n", 2, "policy", []string{"nf_tables"}},
		{"delete a rule that is not there", "*nat\n-D KUBE-SVC-A -j RETURN\nCOMMIT\n", 2, "bad rule", nil},
		{"insert past the end", "*nat\n-I KUBE-SERVICES 5 -j RETURN\nCOMMIT\n", 2, "too big", nil},
		{"REJECT in nat", "*nat\n-A KUBE-SERVICES -j REJECT\nCOMMIT\n", 2, "not valid in table nat", nil},
		{"DNAT in filter", "*filter\n:X - [0:0]\n-A X -p tcp -j DNAT --to-destination 1.2.3.4:80\nCOMMIT\n", 3, "not valid in table filter", nil},
		{"DNAT with a port but no protocol", "*nat\n-A KUBE-SEP-A -j DNAT --to-destination 1.2.3.4:80\nCOMMIT\n", 2, "port specification", nil},
		{"MARK without a mark option", "*nat\n-A KUBE-SERVICES -j MARK\nCOMMIT\n", 2, "MARK needs", nil},
		{"tcp match without -p tcp", "*nat\n-A KUBE-SERVICES -m tcp --dport 80 -j RETURN\nCOMMIT\n", 2, "needs -p tcp", nil},
		{"IPv6 address in an IPv4 table", "*nat\n-A KUBE-SERVICES -d fd00::1 -j RETURN\nCOMMIT\n", 2, "not ipv4", nil},
		{"jump to a built-in chain", "*nat\n-A KUBE-SERVICES -j PREROUTING\nCOMMIT\n", 2, "built-in chain", nil},
		{"unknown option", "*nat\n-A KUBE-SERVICES --bogus 1 -j RETURN\nCOMMIT\n", 2, "unknown option", nil},
		{"chain name too long", "*nat\n:KUBE-SVC-0123456789ABCDEFGHIJK - [0:0]\nCOMMIT\n", 2, "longer than 28", nil},
		{"unknown table", "*nope\nCOMMIT\n", 1, "unknown table", nil},
		{"missing COMMIT", "*nat\n:X - [0:0]\n", 3, "COMMIT expected", nil},
		{"rule outside a table", "-A KUBE-SERVICES -j RETURN\n", 1, "outside a table", nil},
		{"unterminated quote", "*nat\n-A KUBE-SERVICES -m comment --comment \"x -j RETURN\nCOMMIT\n", 2, "unterminated", both},
		{"address list (not modelled)", "*nat\n-A KUBE-SERVICES -s 10.0.0.1,10.0.0.2 -j RETURN\nCOMMIT\n", 2, "not modelled", both},
		{"bad probability", "*nat\n-A KUBE-SVC-A -m statistic --mode random --probability 1.5 -j KUBE-SEP-A\nCOMMIT\n", 2, "probability", nil},
	}
}

func TestRestoreRejectsAndLeavesStateUntouched(t *testing.T) {
	for _, tc := range strictCases() {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			mustRestore(t, f, v4, base)
			before := f.DumpAll(v4)
			re := restoreErr(t, f, tc.data)
			if diff := cmp.Diff([]int{tc.wantLine}, re.Lines); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if !strings.Contains(re.Stderr, tc.wantErr) || !errors.Is(re, ErrRejected) {
				t.Errorf("error %q does not say %q", re.Stderr, tc.wantErr)
			}
			if diff := cmp.Diff(before, f.DumpAll(v4)); diff != "" {
				t.Errorf("failed restore changed state (-before +after):\n%s", diff)
			}
		})
	}
}

func TestDeclaredChainIsFlushedUnderNoflush(t *testing.T) {
	f := NewFake()
	mustRestore(t, f, v4, base)
	mustRestore(t, f, v4, "*nat\n:KUBE-SVC-A - [0:0]\n-A KUBE-SVC-A -m comment --comment new -j KUBE-SEP-A\nCOMMIT\n")
	want := []string{"-A KUBE-SVC-A -m comment --comment new -j KUBE-SEP-A"}
	if diff := cmp.Diff(want, ruleStrings(f.Rules(v4, "nat", "KUBE-SVC-A"))); diff != "" {
		t.Errorf("KUBE-SVC-A (-want +got):\n%s", diff)
	}
	// Undeclared chains keep their rules; a declared built-in chain keeps
	// its rules too (iptables only sets its policy).
	mustRestore(t, f, v4, "*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n")
	if got := len(f.Rules(v4, "nat", "PREROUTING")); got != 1 {
		t.Errorf("PREROUTING has %d rules after being declared, want 1", got)
	}
	if got := len(f.Rules(v4, "nat", "KUBE-SERVICES")); got != 1 {
		t.Errorf("KUBE-SERVICES has %d rules, want 1", got)
	}
}

func TestDeleteChainAfterRemovingReferences(t *testing.T) {
	f := NewFake()
	mustRestore(t, f, v4, base)
	// Kube-proxy style: re-declare (flush) the referring chain, then -X.
	mustRestore(t, f, v4, "*nat\n:KUBE-SVC-A - [0:0]\n:KUBE-SEP-A - [0:0]\n-X KUBE-SEP-A\nCOMMIT\n")
	if ok, _ := f.ChainExists(v4, "nat", "KUBE-SEP-A"); ok {
		t.Errorf("KUBE-SEP-A still exists")
	}
	// Delete rules by spec with a different spelling of the same rule.
	mustRestore(t, f, v4, "*nat\n-D KUBE-SERVICES --destination 10.96.0.1 -p tcp -m tcp --destination-port 80 -j KUBE-SVC-A\n-X KUBE-SVC-A\nCOMMIT\n")
	if got := f.Rules(v4, "nat", "KUBE-SERVICES"); len(got) != 0 {
		t.Errorf("KUBE-SERVICES still has %v", ruleStrings(got))
	}
}

func TestEachTableCommitsOnItsOwn(t *testing.T) {
	// Like iptables-restore: a failing nat section keeps the filter
	// section committed before it.
	f := NewFake()
	re := restoreErr(t, f, "*filter\n:X - [0:0]\nCOMMIT\n*nat\n:Y - [0:0]\n-A Y -j NOPE\nCOMMIT\n")
	if diff := cmp.Diff([]int{6}, re.Lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if ok, _ := f.ChainExists(v4, "filter", "X"); !ok {
		t.Errorf("filter section before the failing one was not committed")
	}
	if ok, _ := f.ChainExists(v4, "nat", "Y"); ok {
		t.Errorf("failing nat section was committed")
	}
}

func TestRestoreRecordsAndFaultInjection(t *testing.T) {
	f := NewFake()
	mustRestore(t, f, v4, base)
	f.FailNextRestores(2)
	for i := 0; i < 2; i++ {
		err := f.Restore(context.Background(), v4, []byte("*nat\n:NEW - [0:0]\nCOMMIT\n"))
		if !errors.Is(err, ErrInjected) {
			t.Fatalf("restore %d = %v, want injected failure", i, err)
		}
	}
	if ok, _ := f.ChainExists(v4, "nat", "NEW"); ok {
		t.Errorf("injected failure changed state")
	}
	mustRestore(t, f, v4, "*nat\n:NEW - [0:0]\nCOMMIT\n")
	calls := f.Restores()
	if len(calls) != 4 {
		t.Fatalf("recorded %d restores, want 4", len(calls))
	}
	if calls[1].Err == nil || calls[3].Err != nil || string(calls[3].Data) != "*nat\n:NEW - [0:0]\nCOMMIT\n" {
		t.Errorf("records wrong: %+v", calls[1:])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Restore(ctx, v4, []byte(base)); !errors.Is(err, context.Canceled) {
		t.Errorf("Restore with a cancelled context = %v", err)
	}
}

func ruleStrings(rules []Rule) []string {
	var out []string
	for i := range rules {
		out = append(out, rules[i].String())
	}
	return out
}
