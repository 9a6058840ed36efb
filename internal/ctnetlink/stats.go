package ctnetlink

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/nfnetlink"
)

const (
	msgGetStats         = 5 // IPCTNL_MSG_CT_GET_STATS
	ctaStatsGlobEntries = 1 // CTA_STATS_GLOBAL_ENTRIES
)

// Count asks the kernel how many entries the namespace's table holds
// (all families): one request, no walk.
func (c *Conn) Count() (int, error) {
	c.seq++
	req := header(make([]byte, 0, 32), msgGetStats, 0, c.seq, unix.AF_UNSPEC)
	finish(req, 0)
	if err := c.send(req); err != nil {
		return 0, fmt.Errorf("conntrack stats request: %w", err)
	}
	if len(c.buf) < recvBuffer {
		c.buf = make([]byte, recvBuffer)
	}
	for {
		n, err := c.recv(c.buf)
		if err != nil {
			return 0, err
		}
		count, found, err := c.parseStats(c.buf[:n])
		if err != nil || found {
			return count, err
		}
	}
}

// parseStats reads the answer to the stats request in b, if there.
func (c *Conn) parseStats(b []byte) (int, bool, error) {
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(binary.NativeEndian.Uint32(b))
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return 0, false, fmt.Errorf("conntrack netlink message of length %d in %d bytes", l, len(b))
		}
		typ := binary.NativeEndian.Uint16(b[4:])
		seq := binary.NativeEndian.Uint32(b[8:])
		body := b[unix.SizeofNlMsghdr:l]
		b = b[min(len(b), (l+3)&^3):]
		switch {
		case seq != c.seq:
		case typ == unix.NLMSG_ERROR:
			return 0, true, fmt.Errorf("conntrack stats: %w", errnoOf(body))
		case typ == subsysCtnetlink<<8|msgGetStats && len(body) >= nfgenLen:
			count := -1
			_ = nfnetlink.Walk(body[nfgenLen:], func(typ uint16, v []byte) {
				if typ == ctaStatsGlobEntries && len(v) == 4 {
					count = int(binary.BigEndian.Uint32(v))
				}
			})
			if count < 0 {
				return 0, true, fmt.Errorf("conntrack stats without an entry count")
			}
			return count, true, nil
		}
	}
	return 0, false, nil
}
