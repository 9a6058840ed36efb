package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
)

// runCommand runs argv to completion; the error carries its combined output.
func runCommand(ctx context.Context, argv []string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %w: %s", argv, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// RunIn runs argv inside network namespace ns (`ip netns exec`, no shell)
// and returns its combined output.
func RunIn(ctx context.Context, ns string, argv ...string) (string, error) {
	full := append([]string{"ip", "netns", "exec", ns}, argv...)
	out, err := exec.CommandContext(ctx, full[0], full[1:]...).CombinedOutput()
	return string(out), err
}
