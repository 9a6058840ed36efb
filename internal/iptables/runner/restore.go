package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
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
	return OffendingLinesFrom(PayloadBytes(data), err)
}

// PayloadBytes is a payload held whole, as an io.WriterTo that writes
// all of it at every call (a bytes.Reader writes it once).
type PayloadBytes []byte

func (p PayloadBytes) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(p)
	return int64(n), err
}

// OffendingLinesFrom is OffendingLines of the payload a streamed restore
// wrote (written again, keeping only the lines shown). payload must
// write the same bytes at every call.
func OffendingLinesFrom(payload io.WriterTo, err error) []string {
	var re *RestoreError
	if !errors.As(err, &re) || len(re.Lines) == 0 {
		return nil
	}
	var want []int
	for _, n := range re.Lines {
		for i := n - offendingContext; i <= n+offendingContext; i++ {
			if i >= 1 && !slices.Contains(want, i) {
				want = append(want, i)
			}
		}
	}
	text := PayloadLines(payload, want)
	var out []string
	for _, i := range want {
		if t, ok := text[i]; ok {
			out = append(out, fmt.Sprintf("%d: %s", i, t))
		}
	}
	return out
}

// PayloadLines returns the text of the given 1-based lines of what
// payload writes, holding no other line. Lines are counted as
// strings.Split counts them: one more than there are "\n".
func PayloadLines(payload io.WriterTo, numbers []int) map[int]string {
	p := &linePicker{want: numbers, got: map[int]string{}, line: 1}
	_, _ = payload.WriteTo(p)
	if slices.Contains(p.want, p.line) {
		// What follows the last "\n" (as strings.Split counts lines).
		p.got[p.line] = string(p.cur)
	}
	return p.got
}

// linePicker is a Writer that keeps the wanted lines of what it is given.
type linePicker struct {
	want []int
	got  map[int]string
	line int    // the line being written
	cur  []byte // its text so far, when wanted
}

func (p *linePicker) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if slices.Contains(p.want, p.line) {
			p.cur = append(p.cur, part...)
		}
		if i < 0 {
			break
		}
		if slices.Contains(p.want, p.line) {
			p.got[p.line] = string(p.cur)
		}
		p.cur, p.line, b = p.cur[:0], p.line+1, b[i+1:]
	}
	return n, nil
}
