package ipset

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/internal/nsrun"
)

// Interface runs ipset. Implementations are safe for concurrent use.
type Interface interface {
	// Save returns the output of `ipset save`: a "create" line per set
	// and an "add" line per member.
	Save(ctx context.Context) ([]byte, error)
	// Restore feeds data to `ipset restore`: create, add, del, flush,
	// destroy and swap commands, one per line. The kernel applies them
	// one by one; a failing line stops the restore (earlier lines stay).
	Restore(ctx context.Context, data []byte) error
	// Counts returns every set's number of members without listing them
	// (`ipset list -terse`): the cheap check of the backend's periodic
	// verification. A count the kernel does not report is -1.
	Counts(ctx context.Context) (map[string]int, error)
}

// Runner is the real Interface: it execs the ipset binary.
type Runner struct {
	// Binary is the ipset program; empty means "ipset" from PATH.
	Binary string
	ns     nsrun.Runner
}

var _ Interface = (*Runner)(nil)

// New returns a Runner that works in the named network namespace
// (/run/netns/NAME), or in the caller's when netns is empty.
func New(netns string) *Runner {
	return &Runner{Binary: "ipset", ns: nsrun.Runner{Name: netns}}
}

// Save implements Interface.
func (r *Runner) Save(ctx context.Context) ([]byte, error) {
	out, err := r.run(ctx, nil, "save")
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Restore implements Interface.
func (r *Runner) Restore(ctx context.Context, data []byte) error {
	_, err := r.run(ctx, data, "restore")
	return err
}

// Counts implements Interface.
func (r *Runner) Counts(ctx context.Context) (map[string]int, error) {
	out, err := r.run(ctx, nil, "list", "-terse")
	if err != nil {
		return nil, err
	}
	return ParseTerse(out)
}

func (r *Runner) run(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	bin := r.Binary
	if bin == "" {
		bin = "ipset"
	}
	var stdout, stderr bytes.Buffer
	err := r.ns.Do(func() error {
		cmd := exec.CommandContext(ctx, bin, args...)
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return cmd.Run()
	})
	if err != nil {
		return nil, fmt.Errorf("ipset %s: %w: %s", args[0], err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}
