package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// RuleCounter reads, straight from the kernel and without iptables-save,
// how many rules each chain of a table holds and which chains the
// built-in chains jump to. The iptables backend's periodic verification
// compares that with what it wrote: at 10k services x 10 endpoints it
// costs a fraction of a second where a save of nat costs seconds.
// Separate from Interface so fakes may omit it.
type RuleCounter interface {
	CountRules(ctx context.Context, fam Family, table string) (*TableCounts, error)
}

// TableCounts is what CountRules reads from one table.
type TableCounts struct {
	// Rules maps every chain of the table, built-in ones included, to
	// its number of rules (a built-in chain's policy is not a rule; an
	// empty chain maps to 0). iptables-nft creates a built-in chain when
	// a rule first needs it: until then it is absent.
	Rules map[string]int
	// Jumps maps each built-in chain to the user chains its rules jump or
	// go to, in rule order.
	Jumps map[string][]string
	// Uses, with iptables-nft only, maps every chain to its nf_tables use
	// count: its rules plus the jumps and gotos to it.
	Uses map[string]int
}

// ChainUseReader is the cheap way to notice a changed chain on
// iptables-nft, where counting every chain's rules takes a netlink dump
// per chain (3-5 s at 10k services x 10 endpoints). ChainUses is one dump
// of the family's chains (~0.2 s there; the kernel does not filter it
// by table) and gives each chain's use count, its rules plus the
// references to it: flushing, emptying or adding to a chain changes it.
// CountChainRules then counts the rules of the few chains whose use
// count moved. Only the iptables-nft Runner offers it.
type ChainUseReader interface {
	// ChainUses maps table name, then chain name, to the use count.
	ChainUses(ctx context.Context, fam Family) (map[string]map[string]int, error)
	// CountChainRules returns the rule counts of the named chains and the
	// jumps of the built-in ones among them. A chain that does not exist
	// counts 0 rules or is left out (a filtered dump cannot tell): take
	// existence from ChainUses.
	CountChainRules(ctx context.Context, fam Family, table string, chains []string) (*TableCounts, error)
}

var _ ChainUseReader = (*Runner)(nil)

// ChainUses implements ChainUseReader (iptables-nft only).
func (r *Runner) ChainUses(_ context.Context, fam Family) (map[string]map[string]int, error) {
	if r.mode != ModeNFT {
		return nil, fmt.Errorf("iptables: chain use counts need iptables-nft, not %s", r.mode)
	}
	var uses map[string]map[string]int
	err := r.ns.do(func() error {
		return withNFTSocket(func(s *nfnetlink.Socket) error {
			var err error
			for range 5 { // a concurrent commit interrupts a dump
				if uses, err = s.ChainUses(nfproto(fam), 0); !errors.Is(err, nfnetlink.ErrInterrupted) {
					break
				}
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("iptables: chain use counts of %s: %w", fam, err)
	}
	return uses, nil
}

// CountChainRules implements ChainUseReader (iptables-nft only).
func (r *Runner) CountChainRules(_ context.Context, fam Family, table string, chains []string) (*TableCounts, error) {
	if r.mode != ModeNFT {
		return nil, fmt.Errorf("iptables: per-chain counts need iptables-nft, not %s", r.mode)
	}
	var out *TableCounts
	err := r.ns.do(func() error {
		return withNFTSocket(func(s *nfnetlink.Socket) error {
			var err error
			out, err = nftCountChainRules(s, nfproto(fam), table, chains)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("iptables: count rules of %s %s: %w", fam, table, err)
	}
	return out, nil
}

// Exists reports whether the table holds the chain.
func (c *TableCounts) Exists(chain string) bool {
	_, ok := c.Rules[chain]
	return ok
}

var _ RuleCounter = (*Runner)(nil)

// CountRules implements RuleCounter in the runner's namespace: one
// netlink dump of the table's chains then one of each chain's rules with
// iptables-nft (nftcount.go, through internal/nfnetlink: 3-5 s at 10k services x 10 endpoints), one
// IPT_SO_GET_ENTRIES read of the table with iptables-legacy
// (legacycount.go: 0.5-0.8 s there).
func (r *Runner) CountRules(_ context.Context, fam Family, table string) (*TableCounts, error) {
	var out *TableCounts
	err := r.ns.do(func() error {
		var err error
		if r.mode == ModeNFT {
			out, err = nftCountRules(fam, table)
		} else {
			out, err = legacyCountRules(fam, table)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("iptables: count rules of %s %s: %w", fam, table, err)
	}
	return out, nil
}

// builtinChains are the names of the built-in chains, by netfilter hook
// number (NF_INET_PRE_ROUTING .. NF_INET_POST_ROUTING).
func builtinChains() [5]string {
	return [...]string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
}

// IsBuiltinChain reports whether name is one of the built-in chains.
func IsBuiltinChain(name string) bool {
	switch name {
	case "PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING":
		return true
	}
	return false
}
