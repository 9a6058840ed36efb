package runner

import (
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/klog/v2"
)

// Family is an IP family as iptables sees it: one set of tables each.
type Family string

// The two families: iptables and ip6tables.
const (
	IPv4 Family = "ipv4"
	IPv6 Family = "ipv6"
)

// RulePosition says where EnsureRule puts a missing rule.
type RulePosition string

// Prepend inserts at the top of the chain; Append adds at the bottom.
const (
	Prepend RulePosition = "-I"
	Append  RulePosition = "-A"
)

// The iptables backends Mode reports.
const (
	ModeNFT    = "nf_tables"
	ModeLegacy = "legacy"
)

// Interface runs iptables. Implementations are safe for concurrent use.
type Interface interface {
	// Restore feeds data to iptables-restore (ip6tables-restore for IPv6)
	// with --noflush and a bounded --wait. data is a full restore payload
	// and may hold several tables ("*nat ... COMMIT"). Each table's
	// section is applied atomically at its COMMIT; a failure leaves that
	// table untouched but keeps tables committed earlier in the same data
	// (the kernel's behaviour). Errors are *RestoreError.
	Restore(ctx context.Context, fam Family, data []byte) error
	// SaveTable returns `iptables-save -t table`. Slow on big tables: for
	// cleanup, canary checks and tests, not for every sync. The first
	// full sync calls it for several tables at once.
	SaveTable(ctx context.Context, fam Family, table string) ([]byte, error)
	// EnsureChain creates the chain unless it exists.
	EnsureChain(fam Family, table, chain string) (existed bool, err error)
	// ChainExists reports whether the chain exists.
	ChainExists(fam Family, table, chain string) (bool, error)
	// EnsureRule adds the rule (at pos) unless an identical one is already
	// anywhere in the chain.
	EnsureRule(fam Family, pos RulePosition, table, chain string, args ...string) (existed bool, err error)
	// DeleteRule deletes the rule; no error if it or its chain is absent.
	DeleteRule(fam Family, table, chain string, args ...string) error
	// FlushChain removes every rule of the chain; no error if absent.
	FlushChain(fam Family, table, chain string) error
	// DeleteChain deletes an empty, unreferenced chain (FlushChain it and
	// remove the jumps to it first); no error if absent.
	DeleteChain(fam Family, table, chain string) error
	// Mode is ModeNFT or ModeLegacy.
	Mode() string
}

// StreamRestorer is a runner that can run a restore whose payload is
// written while iptables-restore reads it, through a pipe, instead of
// being held whole: a full sync's payload is ~40 MB at 10k services x 10
// endpoints. It behaves as Restore with the bytes payload.WriteTo writes.
// If WriteTo fails, iptables-restore is killed before it reads the rest
// of the section it was in: that table is left untouched (a table whose
// COMMIT it had already read stays committed, as with a payload Restore
// fails on). Errors are *RestoreError.
type StreamRestorer interface {
	RestoreFrom(ctx context.Context, fam Family, payload io.WriterTo) error
}

var _ StreamRestorer = (*Runner)(nil)

// Options configures New.
type Options struct {
	// Mode forces ModeNFT or ModeLegacy; empty detects it.
	Mode string
	// WaitSeconds bounds the wait for the xtables lock; 0 means 5.
	WaitSeconds int
	// Netns, when set, runs every command inside the named network
	// namespace (/run/netns/<Netns>). For tests.
	Netns string
	// Exec runs iptables-restore, iptables-save and the detection
	// commands; nil means os/exec.
	Exec Exec
}

const defaultWaitSeconds = 5

// ErrFamilyUnavailable is wrapped by every error of a family whose tools
// are missing (a node without ip6tables).
var ErrFamilyUnavailable = errors.New("iptables tools unavailable for this family")

// Runner is the real Interface.
type Runner struct {
	exec  Exec
	ns    nsRunner
	mode  string
	wait  int
	tools map[Family]*familyTools // read-only after New
}

var _ Interface = (*Runner)(nil)

// New detects the iptables mode and prepares both families. A family
// whose tools are missing (no ip6tables) fails only when used.
func New(opts Options) (*Runner, error) {
	return newRunner(opts, newGoIPTables)
}

func newRunner(opts Options, newOps opsFactory) (*Runner, error) {
	if opts.Exec == nil {
		opts.Exec = osExec{}
	}
	if opts.WaitSeconds <= 0 {
		opts.WaitSeconds = defaultWaitSeconds
	}
	if opts.Mode != "" && opts.Mode != ModeNFT && opts.Mode != ModeLegacy {
		return nil, fmt.Errorf("iptables runner: unknown mode %q", opts.Mode)
	}
	r := &Runner{
		exec:  opts.Exec,
		ns:    nsRunner{name: opts.Netns},
		wait:  opts.WaitSeconds,
		tools: map[Family]*familyTools{},
	}
	err := r.ns.do(func() error {
		mode, err := detectMode(opts.Exec, opts.Mode)
		if err != nil {
			return err
		}
		r.mode = mode
		for _, fam := range []Family{IPv4, IPv6} {
			r.tools[fam] = setupFamily(opts.Exec, fam, mode, r.wait, newOps)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("iptables runner: %w", err)
	}
	if t := r.tools[IPv4]; t.err != nil {
		return nil, fmt.Errorf("iptables runner: %w", t.err)
	}
	if t := r.tools[IPv6]; t.err != nil {
		klog.V(2).InfoS("IPv6 iptables unavailable", "err", t.err)
	}
	klog.V(2).InfoS("Using iptables", "mode", r.mode, "restore", r.tools[IPv4].restore, "netns", opts.Netns)
	return r, nil
}

// Mode is the detected or forced iptables mode.
func (r *Runner) Mode() string { return r.mode }

func (r *Runner) family(fam Family) (*familyTools, error) {
	t, ok := r.tools[fam]
	if !ok {
		return nil, fmt.Errorf("iptables runner: unknown family %q", fam)
	}
	if t.err != nil {
		return nil, fmt.Errorf("iptables runner: %s: %w: %w", fam, ErrFamilyUnavailable, t.err)
	}
	return t, nil
}
