package iptablestest

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

func TestFakeRuleAndChainOperations(t *testing.T) {
	f := NewFake()
	jump := []string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}
	step := func(what string, existed bool, err error, want bool) {
		t.Helper()
		if err != nil || existed != want {
			t.Fatalf("%s = %v, %v; want existed=%v", what, existed, err, want)
		}
	}
	existed, err := f.EnsureChain(v4, "nat", "KUBE-SERVICES")
	step("EnsureChain", existed, err, false)
	existed, err = f.EnsureChain(v4, "nat", "KUBE-SERVICES")
	step("EnsureChain again", existed, err, true)
	existed, err = f.EnsureRule(v4, runner.Append, "nat", "PREROUTING", "-j", "RETURN")
	step("EnsureRule append", existed, err, false)
	existed, err = f.EnsureRule(v4, runner.Prepend, "nat", "PREROUTING", jump...)
	step("EnsureRule prepend", existed, err, false)
	existed, err = f.EnsureRule(v4, runner.Append, "nat", "PREROUTING", jump...)
	step("EnsureRule again", existed, err, true)
	want := []string{`-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`, "-A PREROUTING -j RETURN"}
	if diff := cmp.Diff(want, ruleStrings(f.Rules(v4, "nat", "PREROUTING"))); diff != "" {
		t.Errorf("PREROUTING (-want +got):\n%s", diff)
	}
	if err := f.DeleteChain(v4, "nat", "KUBE-SERVICES"); err == nil || !strings.Contains(err.Error(), "referenced") {
		t.Errorf("DeleteChain of a referenced chain = %v", err)
	}
	for _, err := range []error{
		f.DeleteRule(v4, "nat", "PREROUTING", jump...),
		f.DeleteRule(v4, "nat", "PREROUTING", jump...), // absent rule
		f.DeleteRule(v4, "nat", "NOPE", jump...),       // absent chain
		f.FlushChain(v4, "nat", "NOPE"),                // absent chain
		f.DeleteChain(v4, "nat", "KUBE-SERVICES"),      // now unreferenced and empty
		f.DeleteChain(v4, "nat", "KUBE-SERVICES"),      // absent
		f.FlushChain(v4, "nat", "PREROUTING"),          // built-in
		f.DeleteRule(runner.IPv6, "nat", "PREROUTING", "-j", "RETURN"),
	} {
		if err != nil {
			t.Errorf("unexpected error: %v", err)
		}
	}
	if got := f.Rules(v4, "nat", "PREROUTING"); len(got) != 0 {
		t.Errorf("PREROUTING not flushed: %v", ruleStrings(got))
	}
	if ok, _ := f.ChainExists(v4, "nat", "KUBE-SERVICES"); ok {
		t.Errorf("KUBE-SERVICES still exists")
	}
}

func TestFakeOperationsAreAsStrictAsRestore(t *testing.T) {
	f := NewFake()
	mustRestore(t, f, v4, "*filter\n:X - [0:0]\n-A X -j RETURN\nCOMMIT\n")
	before := f.DumpAll(v4)
	if _, err := f.EnsureRule(v4, runner.Append, "filter", "INPUT", "-j", "NOPE"); err == nil {
		t.Errorf("EnsureRule with a jump to a missing chain succeeded")
	}
	if _, err := f.EnsureRule(v4, runner.Append, "filter", "NOPE", "-j", "ACCEPT"); err == nil {
		t.Errorf("EnsureRule in a missing chain succeeded")
	}
	if err := f.DeleteChain(v4, "filter", "X"); err == nil {
		t.Errorf("DeleteChain of a non-empty chain succeeded")
	}
	if err := f.DeleteChain(v4, "filter", "INPUT"); err == nil {
		t.Errorf("DeleteChain of a built-in chain succeeded")
	}
	if _, err := f.EnsureChain(v4, "nope", "X"); err == nil {
		t.Errorf("EnsureChain in an unknown table succeeded")
	}
	if diff := cmp.Diff(before, f.DumpAll(v4)); diff != "" {
		t.Errorf("failed operations changed state:\n%s", diff)
	}
	if f.Mode() != runner.ModeNFT {
		t.Errorf("default mode %q", f.Mode())
	}
	f.SetMode(runner.ModeLegacy)
	if f.Mode() != runner.ModeLegacy {
		t.Errorf("SetMode did not stick")
	}
}

func TestRulesReturnsCopies(t *testing.T) {
	f := NewFake()
	mustRestore(t, f, v4, "*filter\n:X - [0:0]\n-A X -s 10.0.0.0/8 -m comment --comment c -j RETURN\nCOMMIT\n")
	rules := f.Rules(v4, "filter", "X")
	rules[0].Args[0] = "changed"
	rules[0].Source.Value = "changed"
	rules[0].Matches[0].Options[0].Values[0] = "changed"
	if got := f.Rules(v4, "filter", "X")[0].String(); got != "-A X -s 10.0.0.0/8 -m comment --comment c -j RETURN" {
		t.Errorf("caller changed the fake's rule: %s", got)
	}
}

func TestSplitLineAndQuoting(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{`-A X  -m comment --comment "a b" -j RETURN`, []string{"-A", "X", "-m", "comment", "--comment", "a b", "-j", "RETURN"}},
		{`--comment "x \"y\" z\\w"`, []string{"--comment", `x "y" z\w`}},
		{`--comment ""`, []string{"--comment", ""}},
		{`--comment ab"cd ef"gh`, []string{"--comment", "abcd ef", "gh"}}, // as iptables-restore splits it
		{"\t-j\tACCEPT\r", []string{"-j", "ACCEPT"}},
	}
	for _, tc := range tests {
		got, err := splitLine(tc.line)
		if err != nil {
			t.Errorf("splitLine(%q): %v", tc.line, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("splitLine(%q) (-want +got):\n%s", tc.line, diff)
		}
	}
	for _, arg := range []string{"plain", "ns/svc:p80", "a b", `q"uote`, `back\slash`, "", "it's"} {
		got, err := splitLine(quoteArg(arg))
		if err != nil || len(got) != 1 || got[0] != arg {
			t.Errorf("quoteArg(%q) = %s does not round-trip: %q, %v", arg, quoteArg(arg), got, err)
		}
	}
}
