package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	nftVersion    = "iptables v1.8.9 (nf_tables)\n"
	legacyVersion = "iptables v1.8.9 (legacy)\n"
)

// both installs the nft and legacy variants of every tool.
var both = []string{
	"iptables-nft-save", "iptables-legacy-save", "ip6tables-nft-save", "ip6tables-legacy-save",
	"iptables-nft-restore", "iptables-legacy-restore", "ip6tables-nft-restore", "ip6tables-legacy-restore",
}

// withSaves answers the detection saves: full dumps holding the mangle
// table and the rest (detection never asks for one table: that would
// create it on legacy).
func withSaves(x *scriptedExec, nftMangle, legacyMangle, nftAll, legacyAll string) *scriptedExec {
	for _, fam := range []string{"iptables", "ip6tables"} {
		x.on(fam+"-nft-save", reply{stdout: nftMangle + nftAll})
		x.on(fam+"-legacy-save", reply{stdout: legacyMangle + legacyAll})
	}
	return x
}

// detectionCase is a host setup and the restore command it should lead to.
type detectionCase struct {
	name        string
	forced      string
	exec        func(t *testing.T) *scriptedExec
	wantMode    string
	wantRestore Command
}

func detectionCases() []detectionCase {
	const hint = "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n"
	const twoRules = "*nat\n:X - [0:0]\n-A X -j RETURN\n-A X -j RETURN\nCOMMIT\n"
	const oneRule = "*nat\n:X - [0:0]\n-A X -j RETURN\nCOMMIT\n"
	return []detectionCase{{
		name:   "forced legacy uses the legacy binaries",
		forced: ModeLegacy,
		exec: func(t *testing.T) *scriptedExec {
			return versions(newScriptedExec(t, both...), "-legacy", legacyVersion)
		},
		wantMode:    ModeLegacy,
		wantRestore: Command{Name: "iptables-legacy-restore", Args: []string{"--noflush", "--wait=5"}},
	}, {
		name: "kubelet hint chain in nft wins over more legacy rules",
		exec: func(t *testing.T) *scriptedExec {
			x := withSaves(newScriptedExec(t, both...), hint, "", "", twoRules)
			return versions(x, "-nft", nftVersion)
		},
		wantMode:    ModeNFT,
		wantRestore: Command{Name: "iptables-nft-restore", Args: []string{"--noflush", "--wait=5"}},
	}, {
		name: "kubelet hint chain in legacy",
		exec: func(t *testing.T) *scriptedExec {
			x := withSaves(newScriptedExec(t, both...), "", hint, oneRule, "")
			return versions(x, "-legacy", legacyVersion)
		},
		wantMode:    ModeLegacy,
		wantRestore: Command{Name: "iptables-legacy-restore", Args: []string{"--noflush", "--wait=5"}},
	}, {
		name: "more legacy rules",
		exec: func(t *testing.T) *scriptedExec {
			x := withSaves(newScriptedExec(t, both...), "", "", oneRule, twoRules)
			return versions(x, "-legacy", legacyVersion)
		},
		wantMode:    ModeLegacy,
		wantRestore: Command{Name: "iptables-legacy-restore", Args: []string{"--noflush", "--wait=5"}},
	}, {
		name: "tie goes to nf_tables",
		exec: func(t *testing.T) *scriptedExec {
			x := withSaves(newScriptedExec(t, both...), "", "", oneRule, oneRule)
			return versions(x, "-nft", nftVersion)
		},
		wantMode:    ModeNFT,
		wantRestore: Command{Name: "iptables-nft-restore", Args: []string{"--noflush", "--wait=5"}},
	}, {
		name: "plain binaries: iptables --version decides",
		exec: func(t *testing.T) *scriptedExec {
			return versions(newScriptedExec(t), "", "iptables v1.8.7 (nf_tables)\n")
		},
		wantMode: ModeNFT,
		wantRestore: Command{Name: "iptables-restore",
			Args: []string{"--noflush", "--wait=5", "--wait-interval=100000"}},
	}, {
		name: "old iptables without mode suffix is legacy and has no restore --wait",
		exec: func(t *testing.T) *scriptedExec {
			return versions(newScriptedExec(t), "", "iptables v1.4.21\n")
		},
		wantMode:    ModeLegacy,
		wantRestore: Command{Name: "iptables-restore", Args: []string{"--noflush"}},
	}}
}

func TestNewDetectsModeAndBinaries(t *testing.T) {
	for _, tc := range detectionCases() {
		t.Run(tc.name, func(t *testing.T) {
			x := tc.exec(t)
			var log []opsCall
			factory, made := fakeOpsFactory(&log)
			r, err := newRunner(Options{Mode: tc.forced, Exec: x}, factory)
			if err != nil {
				t.Fatalf("newRunner: %v", err)
			}
			if r.Mode() != tc.wantMode {
				t.Errorf("Mode() = %q, want %q", r.Mode(), tc.wantMode)
			}
			payload := []byte("*nat\nCOMMIT\n")
			x.on(strings.Join(append([]string{tc.wantRestore.Name}, tc.wantRestore.Args...), " "), reply{})
			if err := r.Restore(context.Background(), IPv4, payload); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			calls := x.ran()
			tc.wantRestore.Stdin = payload
			if diff := cmp.Diff(tc.wantRestore, calls[len(calls)-1]); diff != "" {
				t.Errorf("restore command (-want +got):\n%s", diff)
			}
			if got, want := made[IPv4].binary, strings.TrimSuffix(tc.wantRestore.Name, "-restore"); got != want {
				t.Errorf("go-iptables runs %q, want %q", got, want)
			}
		})
	}
}

// versions answers `--version` for both families' iptables binaries with
// the given variant suffix ("-nft", "-legacy" or "").
func versions(x *scriptedExec, variant, out string) *scriptedExec {
	x.on("iptables"+variant+" --version", reply{stdout: out})
	x.on("ip6tables"+variant+" --version", reply{stdout: strings.Replace(out, "iptables", "ip6tables", 1)})
	if variant == "" {
		x.on("iptables --version", reply{stdout: out})
	}
	return x
}

func TestNewRejectsBinaryOfTheWrongMode(t *testing.T) {
	x := versions(newScriptedExec(t), "", legacyVersion)
	var log []opsCall
	factory, _ := fakeOpsFactory(&log)
	_, err := newRunner(Options{Mode: ModeNFT, Exec: x}, factory)
	if err == nil || !strings.Contains(err.Error(), "is legacy, want nf_tables") {
		t.Fatalf("newRunner = %v, want a mode mismatch error", err)
	}
}

func TestUnusableIPv6FailsOnlyWhenUsed(t *testing.T) {
	x := newScriptedExec(t, "iptables-nft-restore")
	x.on("iptables-nft --version", reply{stdout: nftVersion})
	x.on("ip6tables --version", reply{stderr: "not found", err: errors.New("exit status 127")})
	var log []opsCall
	factory, _ := fakeOpsFactory(&log)
	r, err := newRunner(Options{Mode: ModeNFT, Exec: x}, factory)
	if err != nil {
		t.Fatalf("newRunner: %v", err)
	}
	if _, err := r.ChainExists(IPv6, "nat", "X"); err == nil {
		t.Errorf("ChainExists(IPv6) succeeded without ip6tables")
	}
	if _, err := r.ChainExists(IPv4, "nat", "X"); err != nil {
		t.Errorf("ChainExists(IPv4): %v", err)
	}
}

func TestSaveTableCommand(t *testing.T) {
	x := versions(newScriptedExec(t, both...), "-nft", nftVersion)
	x.on("ip6tables-nft-save -t nat", reply{stdout: "*nat\nCOMMIT\n"})
	var log []opsCall
	factory, _ := fakeOpsFactory(&log)
	r, err := newRunner(Options{Mode: ModeNFT, WaitSeconds: 2, Exec: x}, factory)
	if err != nil {
		t.Fatalf("newRunner: %v", err)
	}
	out, err := r.SaveTable(context.Background(), IPv6, "nat")
	if err != nil || string(out) != "*nat\nCOMMIT\n" {
		t.Fatalf("SaveTable = %q, %v", out, err)
	}
	x.on("ip6tables-nft-restore --noflush --wait=2", reply{})
	if err := r.Restore(context.Background(), IPv6, []byte("x")); err != nil {
		t.Fatalf("Restore: %v", err)
	}
}
