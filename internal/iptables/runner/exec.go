package runner

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// Command is one program run: a binary (name looked up in PATH, or a
// path), its arguments and what to feed on stdin: Stdin, or what
// StdinFrom writes while the program runs.
type Command struct {
	Name  string
	Args  []string
	Stdin []byte
	// StdinFrom, when set, writes the program's input into a pipe as the
	// program reads it, so the input is never held whole. Should it fail,
	// the program is killed before its stdin is closed.
	StdinFrom io.WriterTo
}

// Exec runs commands. The real one is os/exec; tests inject a scripted
// fake to check exactly what would run.
type Exec interface {
	// Run runs cmd to completion and returns what it wrote. err is non-nil
	// when it could not start or exited non-zero.
	Run(ctx context.Context, cmd Command) (stdout, stderr []byte, err error)
	// LookPath reports whether (and where) a binary is installed.
	LookPath(name string) (string, error)
}

// osExec runs commands with os/exec: arguments only, never a shell.
type osExec struct{}

func (osExec) Run(ctx context.Context, cmd Command) ([]byte, []byte, error) {
	c := exec.CommandContext(ctx, cmd.Name, cmd.Args...)
	var stdout, stderr bytes.Buffer
	c.Stdout = &stdout
	c.Stderr = &stderr
	if cmd.StdinFrom != nil {
		err := runStreamed(c, cmd.StdinFrom)
		return stdout.Bytes(), stderr.Bytes(), err
	}
	if cmd.Stdin != nil {
		in, err := stdinOf(cmd.Stdin)
		if err != nil {
			return nil, nil, err
		}
		defer in.Close()
		c.Stdin = in
	}
	err := c.Run()
	return stdout.Bytes(), stderr.Bytes(), err
}

// pipeChunk is how much of a streamed input is buffered before it is
// written to the pipe (the pipe's default capacity).
const pipeChunk = 64 << 10

// runStreamed runs c with its stdin fed by from through a pipe. When from
// fails (other than because the program stopped reading), the program is
// killed before its stdin is closed: iptables-restore commits a table
// only when it reads that table's COMMIT line, so the section from was
// writing is dropped whole; a table whose COMMIT it had read stays, as
// with a payload it rejects (an EOF without COMMIT is an error to it
// too, so closing stdin alone would do: checked on iptables 1.8.9, nft
// and legacy).
func runStreamed(c *exec.Cmd, from io.WriterTo) error {
	in, err := c.StdinPipe()
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(in, pipeChunk)
	_, werr := from.WriteTo(w)
	if werr == nil {
		werr = w.Flush()
	}
	stopped := errors.Is(werr, syscall.EPIPE) // the program exited early
	if werr != nil && !stopped {
		_ = c.Process.Kill()
	}
	_ = in.Close()
	err = c.Wait()
	switch {
	case werr != nil && !stopped:
		return fmt.Errorf("writing the input of %s: %w (killed it)", c.Path, werr)
	case err == nil && werr != nil:
		return fmt.Errorf("writing the input of %s: %w", c.Path, werr)
	}
	return err
}

func (osExec) LookPath(name string) (string, error) { return exec.LookPath(name) }

// memfdMin is the payload size from which stdin is an in-memory file.
const memfdMin = 64 << 10

// stdinOf returns what a command reads data from. A big payload (a full
// sync's restore: 4.7 MB at 1k services) goes in an in-memory file the
// child reads at its own pace: through a pipe it would wait, 64 KiB at a
// time, for a goroutine of this process to copy the next part, which
// garbage collection right after a render delays. Small payloads, and
// kernels without memfd, use a pipe.
func stdinOf(data []byte) (io.ReadCloser, error) {
	if len(data) >= memfdMin {
		if f, err := memfdWith(data); err == nil {
			return f, nil
		}
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func memfdWith(data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("switchyard-restore", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "switchyard-restore")
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
