package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// netnsPrefix names every namespace this harness creates.
const netnsPrefix = "sybench-"

// newNetns creates a fresh network namespace. The caller must call the
// returned delete function (it flushes the iptables tables first, so the
// kernel frees hundreds of thousands of rules now, not in the background
// of the next measurement).
func newNetns(mode string) (name string, del func() error, err error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	name = netnsPrefix + hex.EncodeToString(b[:])
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("ip netns add %s: %w: %s", name, err, out)
	}
	del = func() error {
		// Best effort: the namespace goes away below anyway.
		_ = flushTables(context.Background(), name, mode)
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			return fmt.Errorf("ip netns del %s: %w: %s", name, err, out)
		}
		return nil
	}
	return name, del, nil
}

// restoreBinary is the mode's iptables-restore (IPv4).
func restoreBinary(mode string) string {
	if mode == runner.ModeLegacy {
		return "iptables-legacy-restore"
	}
	return "iptables-nft-restore"
}

// flushTables empties every table the backend writes in ns (a plain
// restore flushes each table it names and deletes its chains).
func flushTables(ctx context.Context, ns, mode string) error {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, restoreBinary(mode), waitFlag())
	cmd.Stdin = strings.NewReader("*mangle\nCOMMIT\n*filter\nCOMMIT\n*nat\nCOMMIT\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("flush tables in %s: %w: %s", ns, err, out)
	}
	return nil
}

// waitFlag makes iptables-restore wait for the xtables lock like the
// runner does, instead of failing while another user holds it.
func waitFlag() string { return fmt.Sprintf("--wait=%d", lockWaitSeconds) }
