package runner

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newTestRunner(t *testing.T) (*Runner, *[]opsCall, map[Family]*fakeOps) {
	t.Helper()
	x := versions(newScriptedExec(t, both...), "-legacy", legacyVersion)
	log := &[]opsCall{}
	factory, made := fakeOpsFactory(log)
	r, err := newRunner(Options{Mode: ModeLegacy, Exec: x}, factory)
	if err != nil {
		t.Fatal(err)
	}
	return r, log, made
}

func TestEnsureAndDeleteThroughGoIPTables(t *testing.T) {
	r, log, made := newTestRunner(t)
	rule := []string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}
	steps := []struct {
		name    string
		do      func() (bool, error)
		want    bool
		wantOps []string
	}{
		{"create chain", func() (bool, error) { return r.EnsureChain(IPv6, "nat", "KUBE-SERVICES") },
			false, []string{"ChainExists", "NewChain"}},
		{"chain exists now", func() (bool, error) { return r.EnsureChain(IPv6, "nat", "KUBE-SERVICES") },
			true, []string{"ChainExists"}},
		{"prepend a jump", func() (bool, error) {
			return r.EnsureRule(IPv6, Prepend, "nat", "KUBE-SERVICES", rule...)
		}, false, []string{"Exists", "Insert"}},
		{"jump exists", func() (bool, error) {
			return r.EnsureRule(IPv6, Append, "nat", "KUBE-SERVICES", rule...)
		}, true, []string{"Exists"}},
		{"delete the rule", func() (bool, error) { return false, r.DeleteRule(IPv6, "nat", "KUBE-SERVICES", rule...) },
			false, []string{"Delete"}},
		{"delete an absent rule", func() (bool, error) { return false, r.DeleteRule(IPv6, "nat", "KUBE-SERVICES", rule...) },
			false, []string{"Delete", "ChainExists", "Exists"}},
		{"delete from an absent chain", func() (bool, error) { return false, r.DeleteRule(IPv6, "nat", "NOPE", rule...) },
			false, []string{"Delete", "ChainExists"}},
		{"flush an absent chain", func() (bool, error) { return false, r.FlushChain(IPv6, "nat", "NOPE") },
			false, []string{"ChainExists"}},
		{"flush", func() (bool, error) { return false, r.FlushChain(IPv6, "nat", "KUBE-SERVICES") },
			false, []string{"ChainExists", "ClearChain"}},
		{"delete chain", func() (bool, error) { return false, r.DeleteChain(IPv6, "nat", "KUBE-SERVICES") },
			false, []string{"DeleteChain"}},
		{"delete an absent chain", func() (bool, error) { return false, r.DeleteChain(IPv6, "nat", "KUBE-SERVICES") },
			false, []string{"DeleteChain", "ChainExists"}},
	}
	for _, s := range steps {
		*log = nil
		got, err := s.do()
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got != s.want {
			t.Errorf("%s: existed = %v, want %v", s.name, got, s.want)
		}
		var ops []string
		for _, c := range *log {
			if c.Fam != IPv6 {
				t.Errorf("%s: %s ran on %s", s.name, c.Op, c.Fam)
			}
			ops = append(ops, c.Op)
		}
		if diff := cmp.Diff(s.wantOps, ops); diff != "" {
			t.Errorf("%s: go-iptables calls (-want +got):\n%s", s.name, diff)
		}
	}
	if len(made[IPv4].chains) != 0 {
		t.Errorf("IPv4 was touched: %v", made[IPv4].chains)
	}
}

func TestDeleteChainStillInUseFails(t *testing.T) {
	r, _, _ := newTestRunner(t)
	if _, err := r.EnsureChain(IPv4, "filter", "X"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.EnsureRule(IPv4, Append, "filter", "X", "-j", "RETURN"); err != nil {
		t.Fatal(err)
	}
	if err := r.DeleteChain(IPv4, "filter", "X"); err == nil {
		t.Errorf("DeleteChain of a non-empty chain succeeded")
	}
	if _, err := r.EnsureRule(IPv4, "-Z", "filter", "X", "-j", "RETURN"); err == nil {
		t.Errorf("EnsureRule accepted position -Z")
	}
}
