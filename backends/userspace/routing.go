package userspace

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// PolicyRoute is the policy routing that delivers marked packets to the
// proxy's transparent sockets: `ip rule add fwmark Mark/Mark lookup Table
// pref Priority` and `ip route add local default dev lo table Table`, per
// family. Packets to a non-local address (a client's, for the replies of
// an endpoint to a connection the proxy opened from that client's
// address) are then delivered locally, where the socket takes them.
type PolicyRoute struct {
	Mark     uint32
	Table    int
	Priority int
}

// Routing reads and writes the node's policy routing;
// NetlinkRouting is the kernel's, a stateful fake serves unit tests.
type Routing interface {
	// EnsurePolicyRoute adds the rule and the route if missing.
	EnsurePolicyRoute(fam v1.IPFamily, r PolicyRoute) error
	// PolicyRouteMissing describes what of the rule and route is
	// missing (nothing: nil).
	PolicyRouteMissing(fam v1.IPFamily, r PolicyRoute) ([]string, error)
	// RemovePolicyRoute deletes the rule and the route; absent ones are
	// no error.
	RemovePolicyRoute(fam v1.IPFamily, r PolicyRoute) error
}

// NetlinkRouting is Routing over rtnetlink in one network namespace.
type NetlinkRouting struct {
	h *netlink.Handle
}

var _ Routing = (*NetlinkRouting)(nil)

// NewNetlinkRouting opens rtnetlink in ns (netns.None(): the caller's
// namespace).
func NewNetlinkRouting(ns netns.NsHandle) (*NetlinkRouting, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("open rtnetlink: %w", err)
	}
	return &NetlinkRouting{h: h}, nil
}

// Close releases the netlink socket.
func (n *NetlinkRouting) Close() { n.h.Close() }

func nlFamily(fam v1.IPFamily) int {
	if fam == v1.IPv6Protocol {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

func (n *NetlinkRouting) rule(fam v1.IPFamily, r PolicyRoute) *netlink.Rule {
	rule := netlink.NewRule()
	rule.Family = nlFamily(fam)
	rule.Mark = r.Mark
	mask := r.Mark
	rule.Mask = &mask
	rule.Table = r.Table
	rule.Priority = r.Priority
	return rule
}

func (n *NetlinkRouting) route(fam v1.IPFamily, r PolicyRoute) (*netlink.Route, error) {
	lo, err := n.h.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("find lo: %w", err)
	}
	dst := &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	if fam == v1.IPv6Protocol {
		dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return &netlink.Route{Family: nlFamily(fam), Table: r.Table, Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST,
		Dst: dst, LinkIndex: lo.Attrs().Index}, nil
}

// EnsurePolicyRoute implements Routing.
func (n *NetlinkRouting) EnsurePolicyRoute(fam v1.IPFamily, r PolicyRoute) error {
	route, err := n.route(fam, r)
	if err != nil {
		return err
	}
	if err := n.h.RouteReplace(route); err != nil {
		return fmt.Errorf("add local route to table %d: %w", r.Table, err)
	}
	ok, err := n.hasRule(fam, r)
	if err != nil || ok {
		return err
	}
	if err := n.h.RuleAdd(n.rule(fam, r)); err != nil && !errors.Is(err, syscall.EEXIST) {
		return fmt.Errorf("add rule fwmark %#x lookup %d: %w", r.Mark, r.Table, err)
	}
	return nil
}

func (n *NetlinkRouting) hasRule(fam v1.IPFamily, r PolicyRoute) (bool, error) {
	rules, err := n.h.RuleList(nlFamily(fam))
	if err != nil {
		return false, fmt.Errorf("list rules: %w", err)
	}
	return slices.ContainsFunc(rules, func(x netlink.Rule) bool {
		return x.Table == r.Table && x.Mark == r.Mark && x.Mask != nil && *x.Mask == r.Mark && x.Priority == r.Priority
	}), nil
}

func (n *NetlinkRouting) hasRoute(fam v1.IPFamily, r PolicyRoute) (bool, error) {
	routes, err := n.h.RouteListFiltered(nlFamily(fam), &netlink.Route{Table: r.Table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return false, fmt.Errorf("list table %d: %w", r.Table, err)
	}
	return slices.ContainsFunc(routes, func(x netlink.Route) bool {
		if x.Dst != nil {
			if ones, _ := x.Dst.Mask.Size(); ones != 0 {
				return false
			}
		}
		return x.Type == unix.RTN_LOCAL
	}), nil
}

// PolicyRouteMissing implements Routing.
func (n *NetlinkRouting) PolicyRouteMissing(fam v1.IPFamily, r PolicyRoute) ([]string, error) {
	var missing []string
	ok, err := n.hasRule(fam, r)
	if err != nil {
		return nil, err
	}
	if !ok {
		missing = append(missing, fmt.Sprintf("ip rule fwmark %#x lookup %d was deleted", r.Mark, r.Table))
	}
	if ok, err = n.hasRoute(fam, r); err != nil {
		return nil, err
	}
	if !ok {
		missing = append(missing, fmt.Sprintf("local default route of table %d was deleted", r.Table))
	}
	return missing, nil
}

// RemovePolicyRoute implements Routing.
func (n *NetlinkRouting) RemovePolicyRoute(fam v1.IPFamily, r PolicyRoute) error {
	var errs []error
	for {
		ok, err := n.hasRule(fam, r)
		if err != nil || !ok {
			errs = append(errs, err)
			break
		}
		if err := n.h.RuleDel(n.rule(fam, r)); err != nil {
			errs = append(errs, fmt.Errorf("delete rule fwmark %#x: %w", r.Mark, err))
			break
		}
	}
	if ok, err := n.hasRoute(fam, r); err != nil {
		errs = append(errs, err)
	} else if ok {
		route, err := n.route(fam, r)
		if err == nil {
			err = n.h.RouteDel(route)
		}
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("delete local route of table %d: %w", r.Table, err))
		}
	}
	return errors.Join(errs...)
}
