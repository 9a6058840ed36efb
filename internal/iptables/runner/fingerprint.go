package runner

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

// Fingerprinter tells, for the price of one system call, whether the
// kernel's rules may have changed since the last look. The iptables
// backend records the fingerprint after each of its writes; while it is
// unchanged nobody else wrote, and the periodic verification need not
// read any rules. Separate from Interface so fakes may omit it.
type Fingerprinter interface {
	// Fingerprint changes whenever a rule of the family's tables is added
	// or removed. With iptables-nft it is the nf_tables generation of the
	// network namespace, which every commit by any program bumps (other
	// tables and families included); with iptables-legacy it is the entry
	// count and size of the nat and filter tables.
	Fingerprint(ctx context.Context, fam Family) (uint64, error)
}

var _ Fingerprinter = (*Runner)(nil)

// Fingerprint implements Fingerprinter, in the runner's namespace.
func (r *Runner) Fingerprint(_ context.Context, fam Family) (uint64, error) {
	var fp uint64
	err := r.ns.do(func() error {
		var err error
		if r.mode == ModeNFT {
			fp, err = nftGeneration()
		} else {
			fp, err = legacyTableSizes(fam, "nat", "filter")
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("iptables fingerprint: %w", err)
	}
	return fp, nil
}

// nftGeneration asks nf_tables for the ruleset generation
// (NFT_MSG_GETGEN), a counter every committed transaction bumps.
func nftGeneration() (uint64, error) {
	c, err := nfnetlink.Dial()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	gen, err := nfnetlink.Generation(c)
	if err != nil {
		return 0, fmt.Errorf("nf_tables generation: %w", err)
	}
	return uint64(gen), nil
}

// iptGetinfo is struct ipt_getinfo / ip6t_getinfo (the same layout):
// what IPT_SO_GET_INFO returns about a legacy table without its rules.
type iptGetinfo struct {
	Name       [32]byte
	ValidHooks uint32
	HookEntry  [5]uint32
	Underflow  [5]uint32
	NumEntries uint32
	Size       uint32
}

const iptSoGetInfo = 64 // IPT_SO_GET_INFO == IP6T_SO_GET_INFO

// legacyTableSizes hashes the entry count and size of each table, read
// with IPT_SO_GET_INFO: flushing or deleting a chain changes both.
func legacyTableSizes(fam Family, tables ...string) (uint64, error) {
	domain, level := unix.AF_INET, unix.IPPROTO_IP
	if fam == IPv6 {
		domain, level = unix.AF_INET6, unix.IPPROTO_IPV6
	}
	fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return 0, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	h := fnv.New64a()
	for _, t := range tables {
		info, err := legacyTableInfo(fd, level, t)
		if err != nil {
			return 0, err
		}
		_ = binary.Write(h, binary.LittleEndian, [2]uint32{info.NumEntries, info.Size})
	}
	return h.Sum64(), nil
}
