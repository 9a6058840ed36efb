package runner

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// chunks is a payload written in parts, failing with err after them when
// err is set.
type chunks struct {
	parts []string
	err   error
}

func (c chunks) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, p := range c.parts {
		m, err := io.WriteString(w, p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, c.err
}

// TestRestoreFromRunsWhatRestoreRuns: the streamed restore runs the same
// command with the bytes the payload writes.
func TestRestoreFromRunsWhatRestoreRuns(t *testing.T) {
	x := versions(newScriptedExec(t, both...), "-nft", nftVersion)
	x.on("iptables-nft-restore --noflush --wait=5", reply{})
	var log []opsCall
	factory, _ := fakeOpsFactory(&log)
	r, err := newRunner(Options{Mode: ModeNFT, Exec: x}, factory)
	if err != nil {
		t.Fatal(err)
	}
	payload := chunks{parts: []string{"*nat\n", ":A - [0:0]\n", "COMMIT\n"}}
	if err := r.RestoreFrom(context.Background(), IPv4, payload); err != nil {
		t.Fatalf("RestoreFrom: %v", err)
	}
	if err := r.Restore(context.Background(), IPv4, []byte("*nat\n:A - [0:0]\nCOMMIT\n")); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	calls := x.ran()
	if diff := cmp.Diff(calls[len(calls)-1], calls[len(calls)-2]); diff != "" {
		t.Errorf("RestoreFrom ran another command than Restore (-Restore +RestoreFrom):\n%s", diff)
	}
}

// TestRunStreamed runs real programs (no iptables): the input arrives
// whole; a failing payload kills the program and is the error; a program
// that stops reading is reported by its exit status.
func TestRunStreamed(t *testing.T) {
	for _, bin := range []string{"cat", "false", "sleep"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	big := strings.Repeat("-A KUBE-SVC-XXXX -m comment --comment \"ns/svc:p\" -j KUBE-SEP-YYYY\n", 20000)
	t.Run("whole input", func(t *testing.T) {
		out, _, err := osExec{}.Run(context.Background(), Command{Name: "cat", StdinFrom: chunks{parts: []string{big, "COMMIT\n"}}})
		if err != nil || !bytes.Equal(out, []byte(big+"COMMIT\n")) {
			t.Fatalf("cat: err %v, got %d bytes, want %d", err, len(out), len(big)+7)
		}
	})
	t.Run("payload fails", func(t *testing.T) {
		// sleep reads nothing: without the kill, Wait would wait for it.
		injected := errors.New("injected")
		_, _, err := osExec{}.Run(context.Background(), Command{Name: "sleep", Args: []string{"60"}, StdinFrom: chunks{parts: []string{"*nat\n"}, err: injected}})
		if !errors.Is(err, injected) {
			t.Fatalf("err = %v, want the payload's error", err)
		}
	})
	t.Run("program stops reading", func(t *testing.T) {
		_, _, err := osExec{}.Run(context.Background(), Command{Name: "false", StdinFrom: chunks{parts: []string{big, big, big}}})
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("err = %v, want the exit status of false", err)
		}
	})
}

// TestPayloadLinesAcrossWrites: lines split over several writes are
// picked whole, and only those asked for.
func TestPayloadLinesAcrossWrites(t *testing.T) {
	payload := chunks{parts: []string{"*nat\n:A", " - [0:0]\n-A A", " -j X\nCOMMIT", "\n"}}
	got := PayloadLines(payload, []int{2, 3, 5, 9})
	want := map[int]string{2: ":A - [0:0]", 3: "-A A -j X", 5: ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PayloadLines (-want +got):\n%s", diff)
	}
}
