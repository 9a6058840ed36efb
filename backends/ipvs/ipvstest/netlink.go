package ipvstest

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
)

// FakeNetlink keeps links and their addresses. Safe for concurrent use.
type FakeNetlink struct {
	mu    sync.Mutex
	links map[string]*fakeLink
	ops   []string
}

type fakeLink struct {
	kind  string
	addrs []netip.Addr
}

// NewFakeNetlink returns a namespace with only "lo".
func NewFakeNetlink() *FakeNetlink {
	return &FakeNetlink{links: map[string]*fakeLink{"lo": {kind: "loopback"}}}
}

// Ops returns every state-changing call so far ("AddAddress kube-ipvs0
// 10.96.0.10", ...).
func (n *FakeNetlink) Ops() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.ops...)
}

// ResetOps forgets the recorded calls.
func (n *FakeNetlink) ResetOps() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ops = nil
}

// Links returns the link names, sorted.
func (n *FakeNetlink) Links() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name := range n.links {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Addresses returns a link's addresses, sorted (nil for a missing link).
func (n *FakeNetlink) Addresses(link string) []netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.links[link]
	if !ok {
		return nil
	}
	out := slices.Clone(l.addrs)
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// AllAddresses returns the addresses of every link.
func (n *FakeNetlink) AllAddresses() []netip.Addr {
	var out []netip.Addr
	for _, l := range n.Links() {
		out = append(out, n.Addresses(l)...)
	}
	return out
}

// EnsureDummy implements ipvs.Netlink; a link of another kind with the
// name is an error.
func (n *FakeNetlink) EnsureDummy(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l, ok := n.links[name]; ok {
		if l.kind != "dummy" {
			return fmt.Errorf("link %s exists as %s", name, l.kind)
		}
		return nil
	}
	n.links[name] = &fakeLink{kind: "dummy"}
	n.ops = append(n.ops, "EnsureDummy "+name)
	return nil
}

// DeleteLink implements ipvs.Netlink.
func (n *FakeNetlink) DeleteLink(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.links[name]; ok {
		delete(n.links, name)
		n.ops = append(n.ops, "DeleteLink "+name)
	}
	return nil
}

// ListAddresses implements ipvs.Netlink.
func (n *FakeNetlink) ListAddresses(link string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.links[link]
	if !ok {
		return nil, fmt.Errorf("%s: %w", link, ipvs.ErrLinkNotFound)
	}
	return slices.Clone(l.addrs), nil
}

// AddAddress implements ipvs.Netlink.
func (n *FakeNetlink) AddAddress(link string, a netip.Addr) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.links[link]
	if !ok {
		return fmt.Errorf("%s: %w", link, ipvs.ErrLinkNotFound)
	}
	if !a.IsValid() || a.Is4In6() {
		return fmt.Errorf("invalid address %v", a)
	}
	if !slices.Contains(l.addrs, a) {
		l.addrs = append(l.addrs, a)
		n.ops = append(n.ops, "AddAddress "+link+" "+a.String())
	}
	return nil
}

// DelAddress implements ipvs.Netlink.
func (n *FakeNetlink) DelAddress(link string, a netip.Addr) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.links[link]
	if !ok {
		return fmt.Errorf("%s: %w", link, ipvs.ErrLinkNotFound)
	}
	if i := slices.Index(l.addrs, a); i >= 0 {
		l.addrs = slices.Delete(l.addrs, i, i+1)
		n.ops = append(n.ops, "DelAddress "+link+" "+a.String())
	}
	return nil
}
