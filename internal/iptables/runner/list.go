package runner

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// ChainLister lists the rules of one chain. It is separate from Interface
// so that other runners need not implement it; the iptables backend uses
// it, when available, to verify its top-level chains cheaply instead of
// saving whole tables.
type ChainLister interface {
	// ListChain returns the chain's rules as `iptables -t table -S chain`
	// prints them ("-A chain ..." lines; the "-N"/"-P" line is dropped).
	// exists is false (with a nil error) when the chain does not exist.
	ListChain(ctx context.Context, fam Family, table, chain string) (rules []string, exists bool, err error)
}

var _ ChainLister = (*Runner)(nil)

// ListChain implements ChainLister. It reads one chain, not the table:
// with iptables-nft, listing a small chain of a 10,000-service table
// takes milliseconds where iptables-save takes minutes.
func (r *Runner) ListChain(ctx context.Context, fam Family, table, chain string) ([]string, bool, error) {
	t, err := r.family(fam)
	if err != nil {
		return nil, false, err
	}
	args := append(waitArgs(t.restoreArgs), "-t", table, "-S", chain)
	var stdout, stderr []byte
	err = r.ns.do(func() error {
		var runErr error
		stdout, stderr, runErr = r.exec.Run(ctx, Command{Name: t.iptables, Args: args})
		return runErr
	})
	if err != nil {
		// The "no such chain" wording differs between versions and modes:
		// ask instead of parsing it.
		if exists, cerr := r.ChainExists(fam, table, chain); cerr == nil && !exists {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("iptables runner: list %s/%s: %w: %s", table, chain, err, bytes.TrimSpace(stderr))
	}
	return ruleLines(stdout), true, nil
}

// waitArgs reuses the lock-wait flag the restore command got (iptables
// takes the same --wait=N since 1.6.2; older ones get none).
func waitArgs(restoreArgs []string) []string {
	for _, a := range restoreArgs {
		if strings.HasPrefix(a, "--wait=") {
			return []string{a}
		}
	}
	return nil
}

// ruleLines keeps the "-A" lines of `iptables -S` output.
func ruleLines(out []byte) []string {
	var rules []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "-A ") {
			rules = append(rules, line)
		}
	}
	return rules
}
