package runner

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// nsSave dumps a table through `ip netns exec`, a path independent of the
// runner's setns, to prove where the rules landed.
func nsSave(t *testing.T, ns, mode, table string) string {
	t.Helper()
	bin := "iptables-nft-save"
	if mode == ModeLegacy {
		bin = "iptables-legacy-save"
	}
	args := []string{bin, "-t", table}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return string(out)
}

const kernelPayload = `*filter
:SY-TEST-FILTER - [0:0]
-A SY-TEST-FILTER -m comment --comment "ns1/svc1:p80 has no endpoints" -d 10.96.0.9/32 -p tcp -m tcp --dport 80 -j REJECT
COMMIT
*nat
:SY-TEST-SVC - [0:0]
:SY-TEST-SEP - [0:0]
-A SY-TEST-SEP -p tcp -m tcp -j DNAT --to-destination 10.244.1.2:8080
-A SY-TEST-SVC -m statistic --mode random --probability 0.5000000000 -j SY-TEST-SEP
-A SY-TEST-SVC -j SY-TEST-SEP
-A PREROUTING -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j SY-TEST-SVC
COMMIT
`

func TestKernelRunner(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{ModeNFT, ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "sy-runner-"+mode[:3])
			r, err := New(Options{Mode: mode, Netns: ns})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			kernelRestoreAndSave(t, r, ns, mode)
			kernelFailedRestore(t, r, ns, mode)
			kernelStreamedRestore(t, r, ns, mode)
			kernelRuleOps(t, r)
			kernelIPv6(t, r)
		})
	}
}

func kernelRestoreAndSave(t *testing.T, r *Runner, ns, mode string) {
	ctx := context.Background()
	if err := r.Restore(ctx, IPv4, []byte(kernelPayload)); err != nil {
		t.Fatalf("Restore: %v (lines %q)", err, OffendingLines([]byte(kernelPayload), err))
	}
	saved, err := r.SaveTable(ctx, IPv4, "nat")
	if err != nil {
		t.Fatalf("SaveTable: %v", err)
	}
	for _, want := range []string{":SY-TEST-SVC - [0:0]", "-A SY-TEST-SVC -j SY-TEST-SEP",
		"-A SY-TEST-SEP -p tcp -m tcp -j DNAT --to-destination 10.244.1.2:8080"} {
		if !strings.Contains(string(saved), want+"\n") {
			t.Errorf("SaveTable(nat) lacks %q:\n%s", want, saved)
		}
	}
	if got := nsSave(t, ns, mode, "filter"); !strings.Contains(got, `"ns1/svc1:p80 has no endpoints"`) {
		t.Errorf("the namespace's filter table lacks the restored rule:\n%s", got)
	}
	if got := nsSave(t, "", mode, "nat"); strings.Contains(got, "SY-TEST-SVC") {
		t.Errorf("the host namespace got the test chain:\n%s", got)
	}
}

func kernelFailedRestore(t *testing.T, r *Runner, ns, mode string) {
	bad := []byte("*nat\n:SY-TEST-SVC - [0:0]\n-A SY-TEST-SVC -j SY-MISSING\nCOMMIT\n")
	err := r.Restore(context.Background(), IPv4, bad)
	var re *RestoreError
	if !errors.As(err, &re) || len(re.Lines) == 0 {
		t.Fatalf("Restore of a jump to a missing chain = %v, want a RestoreError with lines", err)
	}
	if lines := OffendingLines(bad, err); len(lines) == 0 {
		t.Errorf("OffendingLines is empty for %v", err)
	}
	// The failed transaction flushed nothing: the declaration of
	// SY-TEST-SVC was rolled back with the bad rule.
	if got := nsSave(t, ns, mode, "nat"); !strings.Contains(got, "-A SY-TEST-SVC -j SY-TEST-SEP") {
		t.Errorf("failed restore changed the table:\n%s", got)
	}
}

// kernelStreamedRestore: a streamed payload that fails in the middle of
// a table's section leaves that table untouched (iptables-restore is
// killed before it reads a COMMIT for it); a whole one applies as Restore
// would. (Whether a table whose COMMIT came before the failure was
// committed depends on whether iptables-restore had read it: here it
// never did, the part was still in the runner's buffer.)
func kernelStreamedRestore(t *testing.T, r *Runner, ns, mode string) {
	ctx := context.Background()
	injected := errors.New("injected")
	cut := chunks{parts: []string{"*filter\n:SY-STREAM-F - [0:0]\nCOMMIT\n",
		"*nat\n:SY-STREAM-N - [0:0]\n-A SY-STREAM-N -j RETURN\n"}, err: injected}
	err := r.RestoreFrom(ctx, IPv4, cut)
	var re *RestoreError
	if !errors.As(err, &re) || !errors.Is(err, injected) {
		t.Fatalf("RestoreFrom of a failing payload = %v, want a RestoreError wrapping the payload's error", err)
	}
	if got := nsSave(t, ns, mode, "nat"); strings.Contains(got, "SY-STREAM-N") {
		t.Errorf("the section cut short was applied:\n%s", got)
	}
	whole := chunks{parts: append(cut.parts[1:], "COMMIT\n")}
	if err := r.RestoreFrom(ctx, IPv4, whole); err != nil {
		t.Fatalf("RestoreFrom: %v", err)
	}
	if got := nsSave(t, ns, mode, "nat"); !strings.Contains(got, "-A SY-STREAM-N -j RETURN\n") {
		t.Errorf("the streamed section was not applied:\n%s", got)
	}
}

func kernelRuleOps(t *testing.T, r *Runner) {
	const tbl, ch = "filter", "SY-TEST-OPS"
	check := func(what string, got, want bool, err error) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s = %v, %v; want %v", what, got, err, want)
		}
	}
	existed, err := r.EnsureChain(IPv4, tbl, ch)
	check("EnsureChain (new)", existed, false, err)
	existed, err = r.EnsureChain(IPv4, tbl, ch)
	check("EnsureChain (again)", existed, true, err)
	rule := []string{"-s", "10.0.0.0/8", "-m", "comment", "--comment", "a b", "-j", "RETURN"}
	existed, err = r.EnsureRule(IPv4, Append, tbl, ch, rule...)
	check("EnsureRule (new)", existed, false, err)
	existed, err = r.EnsureRule(IPv4, Prepend, tbl, ch, rule...)
	check("EnsureRule (again)", existed, true, err)
	existed, err = r.EnsureRule(IPv4, Prepend, tbl, ch, "-j", "ACCEPT")
	check("EnsureRule (prepend)", existed, false, err)
	saved, err := r.SaveTable(context.Background(), IPv4, tbl)
	if err != nil {
		t.Fatal(err)
	}
	want := "-A SY-TEST-OPS -j ACCEPT\n-A SY-TEST-OPS -s 10.0.0.0/8 -m comment --comment \"a b\" -j RETURN\n"
	if !strings.Contains(string(saved), want) {
		t.Errorf("rules not in the expected order; want\n%s\ngot\n%s", want, saved)
	}
	kernelDeletes(t, r, tbl, ch, rule)
}

func kernelDeletes(t *testing.T, r *Runner, tbl, ch string, rule []string) {
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("DeleteRule", r.DeleteRule(IPv4, tbl, ch, rule...))
	must("DeleteRule (absent rule)", r.DeleteRule(IPv4, tbl, ch, rule...))
	must("DeleteRule (absent chain)", r.DeleteRule(IPv4, tbl, "SY-NOPE", rule...))
	if _, err := r.EnsureRule(IPv4, Append, tbl, "INPUT", "-j", ch); err != nil {
		t.Fatal(err)
	}
	must("FlushChain", r.FlushChain(IPv4, tbl, ch))
	if err := r.DeleteChain(IPv4, tbl, ch); err == nil {
		t.Errorf("DeleteChain of a chain INPUT jumps to succeeded")
	}
	must("DeleteRule (the jump)", r.DeleteRule(IPv4, tbl, "INPUT", "-j", ch))
	must("DeleteChain", r.DeleteChain(IPv4, tbl, ch))
	must("DeleteChain (absent)", r.DeleteChain(IPv4, tbl, ch))
	must("FlushChain (absent)", r.FlushChain(IPv4, tbl, ch))
	if ok, err := r.ChainExists(IPv4, tbl, ch); err != nil || ok {
		t.Errorf("ChainExists after delete = %v, %v", ok, err)
	}
}

func kernelIPv6(t *testing.T, r *Runner) {
	data := []byte("*filter\n:SY-TEST-V6 - [0:0]\n-A SY-TEST-V6 -s fd00::/64 -j RETURN\nCOMMIT\n")
	if err := r.Restore(context.Background(), IPv6, data); err != nil {
		t.Fatalf("Restore(IPv6): %v", err)
	}
	saved, err := r.SaveTable(context.Background(), IPv6, "filter")
	if err != nil || !strings.Contains(string(saved), "-A SY-TEST-V6 -s fd00::/64 -j RETURN\n") {
		t.Errorf("SaveTable(IPv6) = %v\n%s", err, saved)
	}
}

// TestKernelDetectsModeFromRules checks auto-detection inside fresh
// namespaces: the backend that holds rules wins.
func TestKernelDetectsModeFromRules(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range []string{ModeNFT, ModeLegacy} {
		t.Run(mode, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "sy-runner-"+"det"+mode[:3])
			forced, err := New(Options{Mode: mode, Netns: ns})
			if err != nil {
				t.Fatal(err)
			}
			data := []byte("*filter\n:SY-TEST-DETECT - [0:0]\n-A SY-TEST-DETECT -j RETURN\nCOMMIT\n")
			if err := forced.Restore(context.Background(), IPv4, data); err != nil {
				t.Fatal(err)
			}
			auto, err := New(Options{Netns: ns})
			if err != nil {
				t.Fatal(err)
			}
			if auto.Mode() != mode {
				t.Errorf("detected %q, want %q", auto.Mode(), mode)
			}
		})
	}
}
