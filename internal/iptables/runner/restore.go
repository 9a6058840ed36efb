package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Restore implements Interface.
func (r *Runner) Restore(ctx context.Context, fam Family, data []byte) error {
	return r.restore(ctx, fam, Command{Stdin: data})
}

// RestoreFrom implements StreamRestorer.
func (r *Runner) RestoreFrom(ctx context.Context, fam Family, payload io.WriterTo) error {
	return r.restore(ctx, fam, Command{StdinFrom: payload})
}

// restore runs iptables-restore with cmd's input.
func (r *Runner) restore(ctx context.Context, fam Family, cmd Command) error {
	t, err := r.family(fam)
	if err != nil {
		return &RestoreError{Err: err}
	}
	cmd.Name, cmd.Args = t.restore, t.restoreArgs
	var stderr []byte
	err = r.ns.do(func() error {
		var runErr error
		_, stderr, runErr = r.exec.Run(ctx, cmd)
		return runErr
	})
	if err != nil {
		return &RestoreError{Lines: reportedLines(stderr), Stderr: string(stderr), Err: err}
	}
	return nil
}

// SaveTable implements Interface.
func (r *Runner) SaveTable(ctx context.Context, fam Family, table string) ([]byte, error) {
	t, err := r.family(fam)
	if err != nil {
		return nil, err
	}
	var stdout, stderr []byte
	err = r.ns.do(func() error {
		var runErr error
		stdout, stderr, runErr = r.exec.Run(ctx, Command{Name: t.save, Args: []string{"-t", table}})
		return runErr
	})
	if err != nil {
		return nil, fmt.Errorf("%s -t %s: %w: %s", t.save, table, err, bytes.TrimSpace(stderr))
	}
	return stdout, nil
}

// RestoreError is a failed Restore. Lines are the 1-based payload line
// numbers iptables-restore blamed (none when it did not say).
type RestoreError struct {
	Lines  []int
	Stderr string
	Err    error // the exec error (exit status), or why nothing ran
}

func (e *RestoreError) Error() string {
	msg := strings.Join(strings.Fields(strings.ReplaceAll(e.Stderr, "\n", " ; ")), " ")
	if msg == "" {
		return fmt.Sprintf("iptables-restore: %v", e.Err)
	}
	return fmt.Sprintf("iptables-restore: %v: %s", e.Err, msg)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// lineRE matches how iptables-restore names a line: "Error occurred at
// line: 7" (parse errors), "line 2 failed" (legacy commit), "line 2:
// CHAIN_DEL failed" (nft commit), "COMMIT expected at line 3".
var lineRE = regexp.MustCompile(`\bline:? ([0-9]+)\b`)

func reportedLines(stderr []byte) []int {
	seen := map[int]bool{}
	var lines []int
	for _, m := range lineRE.FindAllSubmatch(stderr, -1) {
		n, err := strconv.Atoi(string(m[1]))
		if err == nil && n > 0 && !seen[n] {
			seen[n] = true
			lines = append(lines, n)
		}
	}
	sort.Ints(lines)
	return lines
}

// offendingContext is how many lines around a blamed line OffendingLines
// shows: iptables-nft blames the table's COMMIT line for errors it finds
// at commit time, so the line before it often names the culprit.
const offendingContext = 1

// OffendingLines returns the payload lines a *RestoreError blames, with a
// line of context either side, each as "N: text", for logging instead of
// the whole payload. It returns nil when err blames no line.
func OffendingLines(data []byte, err error) []string {
	var re *RestoreError
	if !errors.As(err, &re) || len(re.Lines) == 0 {
		return nil
	}
	all := strings.Split(string(data), "\n")
	shown := map[int]bool{}
	var out []string
	for _, n := range re.Lines {
		for i := n - offendingContext; i <= n+offendingContext; i++ {
			if i < 1 || i > len(all) || shown[i] {
				continue
			}
			shown[i] = true
			out = append(out, fmt.Sprintf("%d: %s", i, all[i-1]))
		}
	}
	return out
}
