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
