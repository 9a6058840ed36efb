package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Stderr of real iptables-restore 1.8.9 failures (captured in a netns).
const (
	nftParseErr = "iptables-nft-restore v1.8.9 (nf_tables): Chain 'NOPE' does not exist\n" +
		"Error occurred at line: 9\nTry `iptables-nft-restore -h' or 'iptables-nft-restore --help' for more information.\n"
	legacyTargetErr = "iptables-restore v1.8.9 (legacy): Couldn't load target `NOPE':No such file or directory\n\n" +
		"Error occurred at line: 7\nTry `iptables-restore -h' or 'iptables-restore --help' for more information.\n"
	legacyCommitErr = "iptables-restore: line 2 failed\n"
	nftCommitErr    = "iptables-nft-restore v1.8.9 (nf_tables): \nline 2: CHAIN_DEL failed (Device or resource busy): chain BAR\n"
	noCommitErr     = "iptables-nft-restore: COMMIT expected at line 3\n"
	deprecatedWarn  = "Ignoring deprecated --wait-interval option.\niptables-restore: line 12 failed\n"
)

func TestRestoreErrorCarriesReportedLines(t *testing.T) {
	tests := []struct {
		stderr string
		want   []int
	}{
		{nftParseErr, []int{9}},
		{legacyTargetErr, []int{7}},
		{legacyCommitErr, []int{2}},
		{nftCommitErr, []int{2}},
		{noCommitErr, []int{3}},
		{deprecatedWarn, []int{12}},
		{"iptables-restore: unable to initialize table 'nat'\n", nil},
	}
	for _, tc := range tests {
		x := versions(newScriptedExec(t, both...), "-nft", nftVersion)
		x.on("iptables-nft-restore --noflush --wait=5", reply{stderr: tc.stderr, err: errors.New("exit status 2")})
		var log []opsCall
		factory, _ := fakeOpsFactory(&log)
		r, err := newRunner(Options{Mode: ModeNFT, Exec: x}, factory)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Restore(context.Background(), IPv4, []byte("*nat\nCOMMIT\n"))
		var re *RestoreError
		if !errors.As(err, &re) {
			t.Fatalf("Restore error %v is not a *RestoreError", err)
		}
		if diff := cmp.Diff(tc.want, re.Lines); diff != "" {
			t.Errorf("lines for %q (-want +got):\n%s", tc.stderr, diff)
		}
		if re.Stderr != tc.stderr || !strings.Contains(err.Error(), "exit status 2") {
			t.Errorf("error %q lost stderr or exit status", err)
		}
	}
}

func TestOffendingLines(t *testing.T) {
	data := []byte("*filter\nCOMMIT\n*nat\n:A - [0:0]\n-A A -j NOPE\n-A A -j RETURN\nCOMMIT\n")
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"one line with context", &RestoreError{Lines: []int{5}},
			[]string{"4: :A - [0:0]", "5: -A A -j NOPE", "6: -A A -j RETURN"}},
		{"adjacent lines are not repeated", &RestoreError{Lines: []int{5, 6}},
			[]string{"4: :A - [0:0]", "5: -A A -j NOPE", "6: -A A -j RETURN", "7: COMMIT"}},
		{"first line", &RestoreError{Lines: []int{1}}, []string{"1: *filter", "2: COMMIT"}},
		{"line past the end", &RestoreError{Lines: []int{9}}, []string{"8: "}},
		{"no lines", &RestoreError{Stderr: "boom"}, nil},
		{"other error", errors.New("x"), nil},
		{"wrapped", errWrap{&RestoreError{Lines: []int{2}}}, []string{"1: *filter", "2: COMMIT", "3: *nat"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, OffendingLines(data, tc.err)); diff != "" {
				t.Errorf("OffendingLines (-want +got):\n%s", diff)
			}
		})
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "sync: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }
