package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Layout of the legacy x_tables blob (linux/netfilter_ipv4/ip_tables.h,
// netfilter_ipv6/ip6_tables.h, netfilter/x_tables.h) on 64-bit Linux.
const (
	iptSoGetEntries   = 65 // IPT_SO_GET_ENTRIES == IP6T_SO_GET_ENTRIES
	getEntriesHdrLen  = 40 // struct ipt_get_entries up to entrytable
	iptEntryOffsets   = 88 // target_offset, next_offset in struct ipt_entry
	ip6tEntryOffsets  = 140
	xtTargetHdrLen    = 32 // struct xt_entry_target
	xtExtensionMaxLen = 29 // name inside it
	xtErrorTarget     = "ERROR"
)

// legacyCountRules reads one legacy table with IPT_SO_GET_ENTRIES (the
// blob iptables-legacy-save decodes, without decoding any match) and
// counts rules per chain. A table that changed between the size query
// and the read is read again.
func legacyCountRules(fam Family, table string) (*TableCounts, error) {
	domain, level, offsets := unix.AF_INET, unix.IPPROTO_IP, iptEntryOffsets
	if fam == IPv6 {
		domain, level, offsets = unix.AF_INET6, unix.IPPROTO_IPV6, ip6tEntryOffsets
	}
	fd, err := unix.Socket(domain, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return nil, fmt.Errorf("raw socket: %w", err)
	}
	defer unix.Close(fd)
	for range 5 {
		info, err := legacyTableInfo(fd, level, table)
		if err != nil {
			return nil, err
		}
		blob := make([]byte, getEntriesHdrLen+int(info.Size))
		copy(blob, table)
		binary.NativeEndian.PutUint32(blob[32:], info.Size)
		size := uint32(len(blob))
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), iptSoGetEntries,
			uintptr(unsafe.Pointer(&blob[0])), uintptr(unsafe.Pointer(&size)), 0)
		if errno == unix.EAGAIN {
			continue // the table changed size meanwhile
		}
		if errno != 0 {
			return nil, fmt.Errorf("IPT_SO_GET_ENTRIES %s: %w", table, errno)
		}
		return walkEntries(blob[getEntriesHdrLen:], &info, offsets)
	}
	return nil, fmt.Errorf("IPT_SO_GET_ENTRIES %s: table kept changing", table)
}

func legacyTableInfo(fd, level int, table string) (iptGetinfo, error) {
	var info iptGetinfo
	copy(info.Name[:], table)
	size := uint32(unsafe.Sizeof(info))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), iptSoGetInfo,
		uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	if errno != 0 {
		return info, fmt.Errorf("IPT_SO_GET_INFO %s: %w", table, errno)
	}
	return info, nil
}

// blobEntry is one entry of the blob: its offset, size and target.
type blobEntry struct {
	off, next int
	target    []byte // the target's name; empty for the standard target
	data      []byte // the target's data
}

// walkEntries counts the rules of each chain of a blob. A built-in chain
// runs from its hook entry to its underflow (the policy, not a rule); a
// user chain from an ERROR entry holding its name to the RETURN entry
// closing it (not a rule either); a final ERROR entry ends the table.
// Standard targets with a non-negative verdict jump to the entry after
// a user chain's head.
func walkEntries(b []byte, info *iptGetinfo, offsets int) (*TableCounts, error) {
	hooks := map[int]string{}
	for h, name := range builtinChains() {
		if info.ValidHooks&(1<<h) != 0 {
			hooks[int(info.HookEntry[h])] = name
		}
	}
	heads := map[int]string{} // offset of a user chain's first rule -> its name
	err := forEntries(b, offsets, func(e blobEntry) {
		if string(e.target) == xtErrorTarget {
			heads[e.next] = string(cString(e.data))
		}
	})
	if err != nil {
		return nil, err
	}
	out := &TableCounts{Rules: map[string]int{}, Jumps: map[string][]string{}}
	chain, builtin, n, ended := "", false, 0, false
	closeChain := func() {
		if chain != "" {
			out.Rules[chain] = max(0, n-1) // the policy or RETURN entry
		}
	}
	_ = forEntries(b, offsets, func(e blobEntry) {
		switch name, hook := hooks[e.off]; {
		case ended:
			return
		case hook:
			closeChain()
			chain, builtin, n = name, true, 0
		case string(e.target) == xtErrorTarget:
			closeChain()
			chain, builtin, n = heads[e.next], false, 0
			ended = chain == xtErrorTarget
			return
		}
		n++
		if builtin && len(e.target) == 0 && len(e.data) >= 4 {
			if v := int32(binary.NativeEndian.Uint32(e.data)); v >= 0 {
				if to, ok := heads[int(v)]; ok {
					out.Jumps[chain] = append(out.Jumps[chain], to)
				}
			}
		}
	})
	if !ended {
		return nil, errors.New("x_tables blob without its final ERROR entry")
	}
	delete(out.Rules, xtErrorTarget)
	return out, nil
}

// forEntries calls fn with each entry of the blob, in order.
func forEntries(b []byte, offsets int, fn func(blobEntry)) error {
	for off := 0; off < len(b); {
		if off+offsets+4 > len(b) {
			return fmt.Errorf("truncated x_tables entry at %d", off)
		}
		targetOff := int(binary.NativeEndian.Uint16(b[off+offsets:]))
		nextOff := int(binary.NativeEndian.Uint16(b[off+offsets+2:]))
		if targetOff+xtTargetHdrLen > nextOff || off+nextOff > len(b) {
			return fmt.Errorf("malformed x_tables entry at %d", off)
		}
		t := b[off+targetOff : off+nextOff]
		size := int(binary.NativeEndian.Uint16(t[0:]))
		if size < xtTargetHdrLen || size > len(t) {
			return fmt.Errorf("malformed x_tables target at %d", off)
		}
		fn(blobEntry{off: off, next: off + nextOff, target: cString(t[2 : 2+xtExtensionMaxLen]), data: t[xtTargetHdrLen:size]})
		off += nextOff
	}
	return nil
}

// cString strips a C string's terminating NUL and what follows it.
func cString(v []byte) []byte {
	if i := bytes.IndexByte(v, 0); i >= 0 {
		return v[:i]
	}
	return v
}
