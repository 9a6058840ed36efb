package nfacct

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Interface is what the iptables backend and the metrics need.
type Interface interface {
	// Ensure creates the counter unless it exists.
	Ensure(name string) error
	// Packets reads the counter's packet count.
	Packets(name string) (uint64, error)
}

// Counter names kube-proxy uses (and its metrics read).
const (
	CTStateInvalidDropped      = "ct_state_invalid_dropped_pkts"
	LocalhostNodePortsAccepted = "localhost_nps_accepted_pkts"
	maxNameLen                 = 31 // NFACCT_NAME_MAX (32) less the NUL
	subsysAcct                 = 7  // NFNL_SUBSYS_ACCT
	msgNew                     = 0  // NFNL_MSG_ACCT_NEW
	msgGet                     = 1  // NFNL_MSG_ACCT_GET
	attrName                   = 1  // NFACCT_NAME
	attrPackets                = 2  // NFACCT_PKTS
)

// ErrNotFound is returned for a counter that does not exist.
var ErrNotFound = errors.New("nfacct counter not found")

// Netlink is the kernel's nfacct, in one network namespace.
type Netlink struct {
	sock *nl.SocketHandle
}

var _ Interface = (*Netlink)(nil)

// New opens nfacct in namespace ns (netns.None() for the caller's own).
// Close it when done.
func New(ns netns.NsHandle) (*Netlink, error) {
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), syscall.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("open netfilter netlink socket: %w", err)
	}
	return &Netlink{sock: &nl.SocketHandle{Socket: s}}, nil
}

// Close releases the socket.
func (n *Netlink) Close() { n.sock.Close() }

// Ensure implements Interface.
func (n *Netlink) Ensure(name string) error {
	if _, err := n.Packets(name); !errors.Is(err, ErrNotFound) {
		return err
	}
	req, err := n.request(msgNew, unix.NLM_F_CREATE|unix.NLM_F_ACK, name)
	if err != nil {
		return err
	}
	if _, err := req.Execute(unix.NETLINK_NETFILTER, 0); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating nfacct counter %s: %w", name, err)
	}
	return nil
}

// Packets implements Interface.
func (n *Netlink) Packets(name string) (uint64, error) {
	req, err := n.request(msgGet, unix.NLM_F_ACK, name)
	if err != nil {
		return 0, err
	}
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return 0, fmt.Errorf("reading nfacct counter %s: %w", name, err)
	}
	for _, m := range msgs {
		if v, ok := packetsAttr(m); ok {
			return v, nil
		}
	}
	return 0, fmt.Errorf("reading nfacct counter %s: no packet count in the reply", name)
}

func (n *Netlink) request(msg, flags int, name string) (*nl.NetlinkRequest, error) {
	if name == "" || len(name) > maxNameLen {
		return nil, fmt.Errorf("nfacct counter name %q: must be 1..%d bytes", name, maxNameLen)
	}
	req := nl.NewNetlinkRequest(subsysAcct<<8|msg, flags)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: n.sock}
	req.AddData(&nl.Nfgenmsg{NfgenFamily: unix.AF_UNSPEC, Version: nl.NFNETLINK_V0})
	req.AddData(nl.NewRtAttr(attrName, nl.ZeroTerminated(name)))
	return req, nil
}

// packetsAttr finds NFACCT_PKTS (big-endian u64) in one reply.
func packetsAttr(m []byte) (uint64, bool) {
	if len(m) < nl.SizeofNfgenmsg {
		return 0, false
	}
	attrs, err := nl.ParseRouteAttr(m[nl.SizeofNfgenmsg:])
	if err != nil {
		return 0, false
	}
	for _, a := range attrs {
		if a.Attr.Type&^unix.NLA_F_NESTED == attrPackets && len(a.Value) == 8 {
			return binary.BigEndian.Uint64(a.Value), true
		}
	}
	return 0, false
}
