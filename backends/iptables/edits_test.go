package iptables

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// applyEdits plays edit lines on a chain's rules the way iptables-restore
// does: -D removes the first equal rule, -I N puts the rule at position N.
func applyEdits(t *testing.T, rules, edits []string) []string {
	t.Helper()
	out := slices.Clone(rules)
	for _, e := range edits {
		cmd, rest, _ := strings.Cut(e, " ")
		chain, spec, _ := strings.Cut(rest, " ")
		switch cmd {
		case "-D":
			i := slices.Index(out, "-A "+chain+" "+spec)
			if i < 0 {
				t.Fatalf("%q: no such rule in %q", e, out)
			}
			out = slices.Delete(out, i, i+1)
		case "-I":
			num, spec, _ := strings.Cut(spec, " ")
			n, err := strconv.Atoi(num)
			if err != nil || n < 1 || n > len(out)+1 {
				t.Fatalf("%q: bad position for %d rules", e, len(out))
			}
			out = slices.Insert(out, n-1, "-A "+chain+" "+spec)
		default:
			t.Fatalf("unexpected edit %q", e)
		}
	}
	return out
}

func TestChainEdits(t *testing.T) {
	r := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, rule("KUBE-SERVICES", "-d "+n, "-j KUBE-SVC-"+n))
		}
		return out
	}
	tests := []struct {
		name      string
		from, to  []string
		wantEdits []string
		ok        bool
	}{
		{"insert in the middle", r("a", "c", "z"), r("a", "b", "c", "z"),
			[]string{"-I KUBE-SERVICES 2 -d b -j KUBE-SVC-b"}, true},
		{"delete and insert", r("a", "b", "z"), r("a", "c", "z"),
			[]string{"-D KUBE-SERVICES -d b -j KUBE-SVC-b", "-I KUBE-SERVICES 2 -d c -j KUBE-SVC-c"}, true},
		{"into an empty chain", nil, r("a", "b"),
			[]string{"-I KUBE-SERVICES 1 -d a -j KUBE-SVC-a", "-I KUBE-SERVICES 2 -d b -j KUBE-SVC-b"}, true},
		{"reordered", r("a", "b"), r("b", "a"), nil, false},
		{"duplicate rule", r("a", "a"), r("a"), nil, false},
	}
	for _, tc := range tests {
		edits, ok := chainEdits(tc.from, tc.to)
		if ok != tc.ok {
			t.Fatalf("%s: ok = %v", tc.name, ok)
		}
		if d := cmp.Diff(tc.wantEdits, edits); d != "" {
			t.Errorf("%s: edits (-want +got):\n%s", tc.name, d)
		}
		if ok {
			if d := cmp.Diff(tc.to, applyEdits(t, tc.from, edits)); d != "" {
				t.Errorf("%s: result (-want +got):\n%s", tc.name, d)
			}
		}
	}
}

// TestChainEditsRandom: random subsets of one ordered list (as the
// top-level chains are, in service-name order) always edit into each
// other.
func TestChainEditsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []string
	for i := range 60 {
		all = append(all, rule("KUBE-SERVICES", fmt.Sprintf("-d 10.0.0.%d", i), "-j X"))
	}
	subset := func() []string {
		var out []string
		for _, r := range all {
			if rng.IntN(3) > 0 {
				out = append(out, r)
			}
		}
		return out
	}
	for range 500 {
		from, to := subset(), subset()
		edits, ok := chainEdits(from, to)
		if !ok {
			t.Fatalf("no edits from %q to %q", from, to)
		}
		if d := cmp.Diff(to, applyEdits(t, from, edits)); d != "" {
			t.Fatalf("result (-want +got):\n%s", d)
		}
	}
}
