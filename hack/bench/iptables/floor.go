package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ruleCount counts the rules of an iptables-save dump.
func ruleCount(saved []byte) int { return bytes.Count(saved, []byte("\n-A ")) }

// floorRun times one plain iptables-restore (no --noflush: one
// transaction that replaces the tables) of payload in a fresh namespace:
// the least any tool can spend to install these rules. The payload is
// what switchyard installed, read back with iptables-save, so it holds
// the same chains and rules, including the jumps from the built-in
// chains (without them the kernel would not validate the service chains
// at commit, which costs real time on nf_tables).
func floorRun(ctx context.Context, mode string, payload []byte) (s sample, err error) {
	ns, del, err := newNetns(mode)
	if err != nil {
		return s, err
	}
	defer func() {
		if derr := del(); derr != nil && err == nil {
			err = derr
		}
	}()
	in, err := payloadFile(payload)
	if err != nil {
		return s, err
	}
	defer in.Close()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, restoreBinary(mode), waitFlag())
	// A file, as an operator's `iptables-restore < file` reads, and as
	// the backend's runner passes a big payload (an in-memory file).
	cmd.Stdin = in
	start := time.Now()
	out, err := cmd.CombinedOutput()
	s = sample{wall: time.Since(start), restores: 1}
	s.restoreWall = s.wall
	if err != nil {
		return s, fmt.Errorf("%s in %s: %w: %s", restoreBinary(mode), ns, err, out)
	}
	// `ip netns exec` execs iptables-restore in the same process.
	s.childCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return s, nil
}

// payloadFile returns an open, unlinked temporary file holding payload.
func payloadFile(payload []byte) (*os.File, error) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("sybench-floor-%d", os.Getpid()))
	if err := os.WriteFile(path, payload, 0o600); err != nil {
		return nil, err
	}
	defer os.Remove(path)
	return os.Open(path)
}
