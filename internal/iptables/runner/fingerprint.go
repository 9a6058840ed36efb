package runner

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"golang.org/x/sys/unix"
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

// Netlink constants of nf_tables (linux/netfilter/nf_tables.h,
// nfnetlink.h): the generation request and its one attribute.
const (
	nfnlSubsysNFTables = 10
	nftMsgGetGen       = 16
	nftaGenID          = 1
	nfgenmsgLen        = 4
)

// nftGeneration asks nf_tables for the ruleset generation
// (NFT_MSG_GETGEN), a counter every committed transaction bumps.
func nftGeneration() (uint64, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return 0, fmt.Errorf("netlink socket: %w", err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.NLMSG_HDRLEN+nfgenmsgLen)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], nfnlSubsysNFTables<<8|nftMsgGetGen)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST)
	req[unix.NLMSG_HDRLEN] = unix.AF_UNSPEC // nfgenmsg: family, version 0, res_id 0
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("netlink send: %w", err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, fmt.Errorf("netlink receive: %w", err)
	}
	return parseGenReply(buf[:n])
}

// parseGenReply reads NFTA_GEN_ID out of an NFT_MSG_NEWGEN reply.
func parseGenReply(b []byte) (uint64, error) {
	if len(b) < unix.NLMSG_HDRLEN+nfgenmsgLen {
		return 0, fmt.Errorf("short netlink reply (%d bytes)", len(b))
	}
	if typ := binary.NativeEndian.Uint16(b[4:]); typ == unix.NLMSG_ERROR {
		errno := int32(binary.NativeEndian.Uint32(b[unix.NLMSG_HDRLEN:]))
		return 0, fmt.Errorf("nf_tables generation: %w", unix.Errno(-errno))
	}
	attrs := b[unix.NLMSG_HDRLEN+nfgenmsgLen : min(len(b), int(binary.NativeEndian.Uint32(b[0:])))]
	for len(attrs) >= 4 {
		l, typ := int(binary.NativeEndian.Uint16(attrs[0:])), binary.NativeEndian.Uint16(attrs[2:])&0x3fff
		if l < 4 || l > len(attrs) {
			break
		}
		if typ == nftaGenID && l >= 8 {
			return uint64(binary.BigEndian.Uint32(attrs[4:])), nil
		}
		attrs = attrs[min(len(attrs), (l+3)&^3):]
	}
	return 0, fmt.Errorf("nf_tables generation reply without NFTA_GEN_ID")
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
