package nfnetlink

import (
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Dial opens a netfilter netlink connection, in the network namespace
// of the calling thread, for Get requests.
func Dial() (*netlink.Conn, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return c, nil
}

// Get sends nf_tables request typ (NFT_MSG_GET*, not a dump) of family
// fam (NFPROTO_*) on c and returns the answers. An error the kernel
// answers with is a unix.Errno (errors.As); any other error leaves c out
// of step, to be closed.
func Get(c *netlink.Conn, typ uint16, fam byte, attrs ...StringAttr) ([]netlink.Message, error) {
	data := []byte{fam, unix.NFNETLINK_V0, 0, 0}
	for _, a := range attrs {
		data = AppendString(data, a.Type, a.Value)
	}
	return c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(msgType(typ)), Flags: netlink.Request},
		Data:   data,
	})
}

// Generation reads the ruleset generation (NFT_MSG_GETGEN), a counter
// every committed transaction of any program bumps.
func Generation(c *netlink.Conn) (uint32, error) {
	msgs, err := Get(c, unix.NFT_MSG_GETGEN, unix.NFPROTO_UNSPEC)
	if err != nil {
		return 0, fmt.Errorf("get generation: %w", err)
	}
	return ParseGeneration(msgs)
}

// ParseGeneration reads NFTA_GEN_ID out of an NFT_MSG_NEWGEN answer.
func ParseGeneration(msgs []netlink.Message) (uint32, error) {
	for _, m := range msgs {
		if len(m.Data) < genmsgLen {
			return 0, fmt.Errorf("short nf_tables message")
		}
		var gen []byte
		if err := Walk(m.Data[genmsgLen:], func(t uint16, v []byte) {
			if t == unix.NFTA_GEN_ID && gen == nil {
				gen = v
			}
		}); err != nil {
			return 0, err
		}
		if len(gen) == 4 {
			return Uint32(gen), nil
		}
	}
	return 0, fmt.Errorf("get generation: no generation in the answer")
}

// HasTableUserdata reports whether an NFT_MSG_NEWTABLE answer carries
// userdata (a comment).
func HasTableUserdata(msgs []netlink.Message) bool {
	found := false
	for _, m := range msgs {
		if len(m.Data) < genmsgLen {
			continue
		}
		_ = Walk(m.Data[genmsgLen:], func(t uint16, _ []byte) {
			found = found || t == TableUserdata
		})
	}
	return found
}
