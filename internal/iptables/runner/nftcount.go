package runner

import (
	"errors"
	"maps"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// nftCountRules dumps the chains, then the rules, of one iptables-nft
// table (table `table` of family ip or ip6) and counts the rules per
// chain. Only the chain name of each rule is read, except in the
// built-in chains, whose jump verdicts are decoded too. A dump that a
// concurrent commit interrupts is retried.
func nftCountRules(fam Family, table string) (*TableCounts, error) {
	var err error
	for range 5 {
		var out *TableCounts
		if out, err = nftCountRulesOnce(fam, table); !errors.Is(err, nfnetlink.ErrInterrupted) {
			return out, err
		}
	}
	return nil, err
}

func nftCountRulesOnce(fam Family, table string) (*TableCounts, error) {
	var out *TableCounts
	err := withNFTSocket(func(s *nfnetlink.Socket) error {
		uses, err := s.ChainUses(nfproto(fam), 0)
		if err != nil {
			return err
		}
		out, err = nftCountChainRules(s, nfproto(fam), table, slices.Sorted(maps.Keys(uses[table])))
		if out != nil {
			out.Uses = uses[table]
			if out.Uses == nil {
				out.Uses = map[string]int{}
			}
		}
		return err
	})
	return out, err
}

// nftCountChainRules counts the rules of the named chains of a table, one
// dump per chain: the kernel resumes a dump spanning several reads by
// skipping every rule already sent, so one dump of a whole 400k-rule
// table is quadratic (a minute at 10k services); per chain it is not
// (~25 us a chain). A chain that does not exist counts 0 rules (or is
// left out if the table is gone).
func nftCountChainRules(s *nfnetlink.Socket, fam byte, table string, chains []string) (*TableCounts, error) {
	out := &TableCounts{Rules: make(map[string]int, len(chains)), Jumps: map[string][]string{}}
	for i, name := range chains {
		n, jumps, err := s.ChainRules(fam, uint32(i+1), table, name, IsBuiltinChain(name))
		if errors.Is(err, unix.ENOENT) { // no such table
			continue
		}
		if err != nil {
			return nil, err
		}
		out.Rules[name] = n
		if len(jumps) > 0 {
			out.Jumps[name] = jumps
		}
	}
	return out, nil
}

// withNFTSocket runs fn with a fresh nfnetlink socket.
func withNFTSocket(fn func(*nfnetlink.Socket) error) error {
	s, err := nfnetlink.OpenPlain()
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s)
}

func nfproto(fam Family) byte { return nfnetlink.Family(fam == IPv6) }
