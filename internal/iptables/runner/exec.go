package runner

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// Command is one program run: a binary (name looked up in PATH, or a
// path), its arguments and what to feed on stdin.
type Command struct {
	Name  string
	Args  []string
	Stdin []byte
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
	if cmd.Stdin != nil {
		in, err := stdinOf(cmd.Stdin)
		if err != nil {
			return nil, nil, err
		}
		defer in.Close()
		c.Stdin = in
	}
	var stdout, stderr bytes.Buffer
	c.Stdout = &stdout
	c.Stderr = &stderr
	err := c.Run()
	return stdout.Bytes(), stderr.Bytes(), err
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
