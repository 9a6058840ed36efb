package runner

import (
	"bytes"
	"context"
	"os/exec"
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
		c.Stdin = bytes.NewReader(cmd.Stdin)
	}
	var stdout, stderr bytes.Buffer
	c.Stdout = &stdout
	c.Stderr = &stderr
	err := c.Run()
	return stdout.Bytes(), stderr.Bytes(), err
}

func (osExec) LookPath(name string) (string, error) { return exec.LookPath(name) }
