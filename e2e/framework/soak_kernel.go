package framework

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// KernelCounts is what a proxy holds in a node namespace's kernel, read
// over netlink (no rule is decoded): Services are the service ports with
// endpoints, Endpoints the endpoints summed over those ports.
type KernelCounts struct{ Services, Endpoints int }

// KernelLayout says where a proxy keeps its services and endpoints in one
// mode, for ReadKernelCounts.
type KernelLayout struct {
	proxy, mode string
}

// KernelLayoutFor is the layout of proxy ("switchyard" or "kube-proxy") in
// mode ("nftables", "iptables").
func KernelLayoutFor(proxy, mode string) (KernelLayout, error) {
	if (proxy != "switchyard" && proxy != "kube-proxy") || (mode != "nftables" && mode != "iptables") {
		return KernelLayout{}, fmt.Errorf("no kernel layout for %s in mode %q", proxy, mode)
	}
	return KernelLayout{proxy: proxy, mode: mode}, nil
}

// errChanged: an object went away between two dumps of one read.
var errChanged = errors.New("the ruleset changed during the read")

// ReadKernelCounts counts, in the IPv4 tables of namespace ns, the
// service ports with endpoints and their endpoints, as layout keeps them:
//
//   - nftables, kube-proxy: elements of map "service-ips" (it holds the
//     ports with endpoints); elements of the anonymous maps ("__map*")
//     its service chains draw an endpoint from, DNAT targets or gotos to
//     endpoint chains.
//   - nftables, switchyard: elements of "service-ips" (every port) less
//     those of "services-without-endpoints"; ranges of the interval maps
//     "endpoints-*".
//   - iptables (iptables-nft): KUBE-SVC- and KUBE-SEP- chains of table nat
//     in use (their rules plus the references to them).
//
// A read during which the ruleset generation moved (a proxy committed) is
// done again, up to 5 times; the last one is returned.
func ReadKernelCounts(ns string, layout KernelLayout) (KernelCounts, error) {
	var c KernelCounts
	err := InNetns(ns, func() error {
		s, err := nfnetlink.Open(4 << 20)
		if err != nil {
			return err
		}
		defer s.Close()
		gc, err := nfnetlink.Dial()
		if err != nil {
			return err
		}
		defer gc.Close()
		for range 5 {
			var moved bool
			c, moved, err = layout.readStable(s, gc)
			if err == nil && !moved {
				return nil
			}
			if err != nil && !errors.Is(err, nfnetlink.ErrInterrupted) && !errors.Is(err, errChanged) {
				return err
			}
		}
		return err
	})
	return c, err
}

// readStable reads the counts and tells whether the generation moved.
func (l KernelLayout) readStable(s *nfnetlink.Socket, gc *netlink.Conn) (KernelCounts, bool, error) {
	g0, err := nfnetlink.Generation(gc)
	if err != nil {
		return KernelCounts{}, false, err
	}
	c, err := l.read(s)
	g1, gerr := nfnetlink.Generation(gc)
	if err == nil {
		err = gerr
	}
	return c, g0 != g1, err
}

const nftTable = "kube-proxy"

func (l KernelLayout) read(s *nfnetlink.Socket) (KernelCounts, error) {
	const fam = unix.NFPROTO_IPV4
	if l.mode == "iptables" {
		uses, err := s.ChainUses(fam, 1)
		if err != nil {
			return KernelCounts{}, fmt.Errorf("chain dump: %w", err)
		}
		return KernelCounts{Services: usedChains(uses["nat"], "KUBE-SVC-"), Endpoints: usedChains(uses["nat"], "KUBE-SEP-")}, nil
	}
	var c KernelCounts
	var err error
	if c.Services, err = s.CountElements(fam, 2, nftTable, "service-ips"); err != nil {
		return c, fmt.Errorf("service-ips: %w", err)
	}
	prefix := "__map"
	if l.proxy == "switchyard" {
		prefix = "endpoints-"
		without, err := s.CountElements(fam, 3, nftTable, "services-without-endpoints")
		if err != nil {
			return c, fmt.Errorf("services-without-endpoints: %w", err)
		}
		c.Services -= without
	}
	c.Endpoints, err = countSetElements(s, fam, prefix)
	return c, err
}

// countSetElements sums the elements of the table's sets named prefix*.
// An anonymous constant set (kube-proxy's per-chain maps: nft declares
// their size as the number of elements they are created with, and they
// never change) counts its declared size, so that 10k of them are one
// dump instead of 10k (the kernel finds a set by name in a list: 10k
// lookups of 10k sets took tens of seconds); spotChecks of them, at
// random, are counted element by element and must agree.
func countSetElements(s *nfnetlink.Socket, fam byte, prefix string) (int, error) {
	var sets []nfnetlink.Set
	req := nfnetlink.DumpRequest(unix.NFT_MSG_GETSET, fam, 4, nfnetlink.StringAttr{Type: unix.NFTA_SET_TABLE, Value: nftTable})
	err := s.Dump(req, func(m nfnetlink.Message) error {
		set, err := nfnetlink.ParseSet(m.Attrs)
		if err == nil && set.Table == nftTable && strings.HasPrefix(set.Name, prefix) {
			sets = append(sets, set)
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("set dump: %w", err)
	}
	total, checked := 0, 0
	for i, set := range sets {
		declared := set.Flags&(unix.NFT_SET_ANONYMOUS|unix.NFT_SET_CONSTANT) == unix.NFT_SET_ANONYMOUS|unix.NFT_SET_CONSTANT && set.Size > 0
		if declared && (checked >= spotChecks || rand.IntN(len(sets)) >= spotChecks) {
			total += int(set.Size)
			continue
		}
		n, err := s.CountElements(fam, uint32(5+i), nftTable, set.Name)
		if errors.Is(err, unix.ENOENT) { // deleted since the set dump
			return 0, errChanged
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", set.Name, err)
		}
		if declared {
			checked++
			if n != int(set.Size) {
				return 0, fmt.Errorf("anonymous set %s declares %d elements and holds %d", set.Name, set.Size, n)
			}
		}
		total += n
	}
	return total, nil
}

// spotChecks is how many anonymous sets a read counts element by element.
const spotChecks = 16

// usedChains counts the chains named prefix* whose use count is above 0
// (kube-proxy deletes a stale chain a sync after flushing it).
func usedChains(uses map[string]int, prefix string) int {
	n := 0
	for name, use := range uses {
		if strings.HasPrefix(name, prefix) && use > 0 {
			n++
		}
	}
	return n
}
