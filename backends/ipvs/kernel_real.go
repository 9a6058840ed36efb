package ipvs

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/moby/ipvs"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/internal/nsrun"
	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// NewKernel opens the real kernel interfaces in the named network
// namespace (/run/netns/NAME, as `ip netns add` makes them), or in the
// caller's namespace when netnsName is empty: an IPVS netlink handle, a
// rtnetlink handle, the ipset and iptables runners (which exec the
// tools) and /proc/sys. Close the Kernel when done.
func NewKernel(netnsName string) (*Kernel, error) {
	k := &Kernel{}
	nsPath := ""
	if netnsName != "" {
		nsPath = filepath.Join("/run/netns", netnsName)
	}
	ih, err := ipvs.New(nsPath)
	if err != nil {
		return nil, fmt.Errorf("ipvs: open handle: %w", err)
	}
	k.closers = append(k.closers, ih.Close)
	k.IPVS = &lockedIPVS{h: ih, ns: nsrun.Runner{Name: netnsName}}
	nl, err := newNetlinkHandle(nsPath)
	if err != nil {
		k.Close()
		return nil, err
	}
	k.closers = append(k.closers, nl.h.Close)
	k.Netlink = nl
	k.IPSet = ipset.New(netnsName)
	k.Sysctl = procSysctl{ns: nsrun.Runner{Name: netnsName}}
	ipt, err := runner.New(runner.Options{Netns: netnsName})
	if err != nil {
		k.Close()
		return nil, fmt.Errorf("ipvs: iptables runner: %w", err)
	}
	k.IPTables = ipt
	return k, nil
}

// lockedIPVS serialises calls on one handle: its netlink socket carries
// one request at a time, and the metrics collector reads it concurrently
// with syncs.
type lockedIPVS struct {
	mu sync.Mutex
	h  *ipvs.Handle
	ns nsrun.Runner // for /proc/net/ip_vs
}

func (l *lockedIPVS) GetServices() ([]*ipvs.Service, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.GetServices()
}

func (l *lockedIPVS) GetService(s *ipvs.Service) (*ipvs.Service, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.GetService(s)
}

func (l *lockedIPVS) NewService(s *ipvs.Service) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.NewService(s)
}

func (l *lockedIPVS) UpdateService(s *ipvs.Service) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.UpdateService(s)
}

func (l *lockedIPVS) DelService(s *ipvs.Service) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.DelService(s)
}

func (l *lockedIPVS) GetDestinations(s *ipvs.Service) ([]*ipvs.Destination, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.GetDestinations(s)
}

func (l *lockedIPVS) NewDestination(s *ipvs.Service, d *ipvs.Destination) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.NewDestination(s, d)
}

func (l *lockedIPVS) UpdateDestination(s *ipvs.Service, d *ipvs.Destination) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.UpdateDestination(s, d)
}

func (l *lockedIPVS) DelDestination(s *ipvs.Service, d *ipvs.Destination) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.DelDestination(s, d)
}

func (l *lockedIPVS) GetConfig() (*ipvs.Config, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.GetConfig()
}

func (l *lockedIPVS) SetConfig(c *ipvs.Config) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.h.SetConfig(c)
}

// ReadTable implements IPVS with one read of /proc/net/ip_vs (parsed by
// parseProcTable, proc_table.go). The thread's own view
// (/proc/thread-self) is read: /proc/self/net would show the namespace of
// the process's main thread, not the one nsrun entered.
func (l *lockedIPVS) ReadTable() ([]TableEntry, error) {
	var data []byte
	err := l.ns.Do(func() error {
		var err error
		data, err = os.ReadFile("/proc/thread-self/net/ip_vs")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read IPVS table: %w", err)
	}
	return parseProcTable(data)
}

// netlinkHandle is the real Netlink: an rtnetlink-only handle (opening
// the XFRM and netfilter families too would need modules a node may not
// have loaded).
type netlinkHandle struct {
	h     *netlink.Handle
	mu    sync.Mutex
	links map[string]netlink.Link // cache; dropped on errors and deletes
}

func newNetlinkHandle(nsPath string) (*netlinkHandle, error) {
	var h *netlink.Handle
	var err error
	if nsPath == "" {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	} else {
		var ns netns.NsHandle
		if ns, err = netns.GetFromPath(nsPath); err == nil {
			defer ns.Close()
			h, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ipvs: netlink handle: %w", err)
	}
	return &netlinkHandle{h: h, links: map[string]netlink.Link{}}, nil
}

func (n *netlinkHandle) link(name string) (netlink.Link, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.links[name]; ok {
		return l, nil
	}
	l, err := n.h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("%s: %w", name, ErrLinkNotFound)
		}
		return nil, fmt.Errorf("find link %s: %w", name, err)
	}
	n.links[name] = l
	return l, nil
}

func (n *netlinkHandle) forget(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.links, name)
}

func (n *netlinkHandle) EnsureDummy(name string) error {
	n.forget(name)
	if _, err := n.link(name); !errors.Is(err, ErrLinkNotFound) {
		return err
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name = name
	if err := n.h.LinkAdd(&netlink.Dummy{LinkAttrs: attrs}); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("create dummy %s: %w", name, err)
	}
	return nil
}

func (n *netlinkHandle) DeleteLink(name string) error {
	l, err := n.link(name)
	if errors.Is(err, ErrLinkNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	n.forget(name)
	if err := n.h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return nil
}

func (n *netlinkHandle) ListAddresses(name string) ([]netip.Addr, error) {
	// Look the link up afresh: full syncs and verification list, and a
	// kube-ipvs0 deleted (and maybe recreated) behind our back must show.
	n.forget(name)
	l, err := n.link(name)
	if err != nil {
		return nil, err
	}
	addrs, err := n.h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		n.forget(name)
		return nil, fmt.Errorf("list addresses of %s: %w", name, err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

func hostAddr(a netip.Addr) *netlink.Addr {
	bits := a.BitLen()
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, bits)}}
	if a.Is6() {
		// No duplicate address detection: the address is a VIP, not the
		// node's, and must be usable at once.
		addr.Flags = unix.IFA_F_NODAD
	}
	return addr
}

func (n *netlinkHandle) AddAddress(name string, a netip.Addr) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	if err := n.h.AddrAdd(l, hostAddr(a)); err != nil && !errors.Is(err, unix.EEXIST) {
		n.forget(name)
		return fmt.Errorf("add %s to %s: %w", a, name, err)
	}
	return nil
}

func (n *netlinkHandle) DelAddress(name string, a netip.Addr) error {
	l, err := n.link(name)
	if err != nil {
		return err
	}
	if err := n.h.AddrDel(l, hostAddr(a)); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		n.forget(name)
		return fmt.Errorf("delete %s from %s: %w", a, name, err)
	}
	return nil
}

// procSysctl is the real Sysctl: /proc/sys read and written from a thread
// inside the namespace (network sysctls are per namespace).
type procSysctl struct {
	ns nsrun.Runner
}

func (s procSysctl) Get(name string) (string, error) {
	var v string
	err := s.ns.Do(func() error {
		b, err := os.ReadFile(filepath.Join("/proc/sys", name))
		v = strings.TrimSpace(string(b))
		return err
	})
	return v, err
}

func (s procSysctl) Set(name, value string) error {
	return s.ns.Do(func() error {
		return os.WriteFile(filepath.Join("/proc/sys", name), []byte(value), 0o644)
	})
}
