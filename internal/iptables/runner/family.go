package runner

import (
	"fmt"
	"strconv"

	"github.com/coreos/go-iptables/iptables"
)

// familyTools are one family's binaries and go-iptables handle.
type familyTools struct {
	iptables    string   // "iptables-nft", "ip6tables-legacy", "iptables", ...
	restore     string   // matching iptables-restore
	save        string   // matching iptables-save
	restoreArgs []string // flags before the payload on stdin
	ops         ruleOps
	err         error // why this family is unusable
}

// ruleOps is the part of go-iptables' *IPTables the runner uses.
type ruleOps interface {
	Exists(table, chain string, rulespec ...string) (bool, error)
	Insert(table, chain string, pos int, rulespec ...string) error
	Append(table, chain string, rulespec ...string) error
	Delete(table, chain string, rulespec ...string) error
	ChainExists(table, chain string) (bool, error)
	NewChain(table, chain string) error
	ClearChain(table, chain string) error
	DeleteChain(table, chain string) error
}

// opsFactory builds the ruleOps for one family's iptables binary.
type opsFactory func(fam Family, binary string, waitSeconds int) (ruleOps, error)

func newGoIPTables(fam Family, binary string, waitSeconds int) (ruleOps, error) {
	proto := iptables.ProtocolIPv4
	if fam == IPv6 {
		proto = iptables.ProtocolIPv6
	}
	return iptables.New(iptables.IPFamily(proto), iptables.Path(binary), iptables.Timeout(waitSeconds))
}

// restoreWaitIntervalMicros is the lock poll interval where supported.
const restoreWaitIntervalMicros = 100000

// setupFamily finds fam's binaries for mode, checks that the iptables
// binary really is that mode, and derives the restore flags from its
// version.
func setupFamily(x Exec, fam Family, mode string, wait int, newOps opsFactory) *familyTools {
	t := binaries(x, fam, mode)
	out, _, err := run(x, Command{Name: t.iptables, Args: []string{"--version"}})
	if err != nil {
		t.err = fmt.Errorf("%s --version: %w", t.iptables, err)
		return t
	}
	v, binMode, err := parseVersion(out)
	if err != nil {
		t.err = err
		return t
	}
	if binMode != mode {
		t.err = fmt.Errorf("%s is %s, want %s", t.iptables, binMode, mode)
		return t
	}
	t.restoreArgs = restoreFlags(v, wait)
	t.ops, t.err = newOps(fam, t.iptables, wait)
	return t
}

// binaries prefers the mode-specific names (iptables-nft-restore, ...),
// falling back to the plain ones.
func binaries(x Exec, fam Family, mode string) *familyTools {
	base := "iptables"
	if fam == IPv6 {
		base = "ip6tables"
	}
	variant := base + "-nft"
	if mode == ModeLegacy {
		variant = base + "-legacy"
	}
	if installed(x, variant+"-restore") {
		base = variant
	}
	return &familyTools{iptables: base, restore: base + "-restore", save: base + "-save"}
}

// restoreFlags: iptables-restore takes --wait since 1.6.2, and
// --wait-interval from 1.6.2 until 1.8.8 deprecated it (it then only
// prints a warning).
func restoreFlags(v version, wait int) []string {
	args := []string{"--noflush"}
	if !v.atLeast(version{1, 6, 2}) {
		return args
	}
	args = append(args, "--wait="+strconv.Itoa(wait))
	if !v.atLeast(version{1, 8, 8}) {
		args = append(args, "--wait-interval="+strconv.Itoa(restoreWaitIntervalMicros))
	}
	return args
}
