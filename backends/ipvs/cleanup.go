package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/moby/ipvs"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// addrOf converts a net.IP (nil: invalid).
func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

// Cleanup removes everything the mode installs: every IPVS virtual
// server (switchyard owns IPVS on the node, as kube-proxy does) except
// those on ExcludeCIDRs, the
// kube-ipvs0 interface with its addresses, the jumps and chains, and the
// sets. It carries on past errors and returns them all.
func (b *Backend) Cleanup(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, f := range b.cfg.families() {
		errs = append(errs, b.cleanupIPTables(ctx, f))
	}
	errs = append(errs, b.cleanupKernelObjects(ctx))
	b.reset()
	return errors.Join(errs...)
}

// CleanupKernelObjects removes what the mode installs outside iptables:
// the virtual servers, kube-ipvs0 and the sets. A mode taking over from
// ipvs calls it once its own rules are in and the ipvs mode's chains
// (which use the sets) are gone.
func (b *Backend) CleanupKernelObjects(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cleanupKernelObjects(ctx)
}

// DrainKernelObjects is CleanupKernelObjects for a mode taking over from
// ipvs while connections run through IPVS: a virtual server whose real
// servers still carry connections (active or inactive) stays, and so does
// kube-ipvs0 (its addresses make those packets local, where IPVS sees
// them), until its connections end; new connections never reach it, the
// new mode translates them before routing. It returns how many virtual
// servers stay. The sets always go.
func (b *Backend) DrainKernelObjects(ctx context.Context) (kept int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	svcs, err := b.k.IPVS.GetServices()
	if err != nil {
		return 0, fmt.Errorf("list virtual servers: %w", err)
	}
	var errs []error
	for _, s := range svcs {
		if s.FWMark == 0 && b.cfg.excluded(addrOf(s.Address)) {
			continue // --ipvs-exclude-cidrs
		}
		busy, err := b.carriesConnections(s)
		if err != nil || busy {
			kept++
			errs = append(errs, err)
			continue
		}
		if err := ignoreMissing(b.k.IPVS.DelService(s)); err != nil {
			errs = append(errs, fmt.Errorf("delete virtual server: %w", err))
		}
	}
	if kept == 0 {
		if err := b.k.Netlink.DeleteLink(DummyInterface); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", DummyInterface, err))
		}
	}
	errs = append(errs, b.cleanupSets(ctx))
	return kept, errors.Join(errs...)
}

// carriesConnections reports whether a real server of s has connections.
func (b *Backend) carriesConnections(s *ipvs.Service) (bool, error) {
	dests, err := b.k.IPVS.GetDestinations(s)
	if err != nil {
		return false, ignoreMissing(err)
	}
	for _, d := range dests {
		if d.ActiveConnections+d.InactiveConnections > 0 {
			return true, nil
		}
	}
	return false, nil
}

func (b *Backend) cleanupKernelObjects(ctx context.Context) error {
	errs := []error{b.cleanupServers()}
	if err := b.k.Netlink.DeleteLink(DummyInterface); err != nil {
		errs = append(errs, fmt.Errorf("delete %s: %w", DummyInterface, err))
	}
	errs = append(errs, b.cleanupSets(ctx))
	return errors.Join(errs...)
}

// cleanupIPTables deletes, in one restore, every rule of a built-in chain
// that jumps to one of our chains, then flushes and deletes our chains.
func (b *Backend) cleanupIPTables(ctx context.Context, f v1.IPFamily) error {
	var payload strings.Builder
	ours := map[string][]string{"nat": natChains, "filter": filterChains}
	for _, table := range []string{"filter", "nat"} {
		data, err := b.k.IPTables.SaveTable(ctx, runnerFamily(f), table)
		if err != nil {
			return fmt.Errorf("cleanup %s: %w", f, err)
		}
		saved := runner.ParseSave(data)
		var lines []string
		for _, r := range saved.Rules {
			if !slices.Contains(ours[table], r.Chain) && slices.Contains(ours[table], r.Target) {
				lines = append(lines, r.DeleteLine())
			}
		}
		var present []string
		for _, c := range ours[table] {
			if slices.Contains(saved.Chains, c) {
				present = append(present, c)
			}
		}
		if len(lines) == 0 && len(present) == 0 {
			continue
		}
		payload.WriteString("*" + table + "\n")
		for _, c := range present {
			payload.WriteString(":" + c + " - [0:0]\n") // flushes it
		}
		for _, l := range lines {
			payload.WriteString(l + "\n")
		}
		for _, c := range present {
			payload.WriteString("-X " + c + "\n")
		}
		payload.WriteString("COMMIT\n")
	}
	if payload.Len() == 0 {
		return nil
	}
	if err := b.k.IPTables.Restore(ctx, runnerFamily(f), []byte(payload.String())); err != nil {
		return fmt.Errorf("cleanup %s: %w", f, err)
	}
	return nil
}

func (b *Backend) cleanupServers() error {
	svcs, err := b.k.IPVS.GetServices()
	if err != nil {
		return fmt.Errorf("cleanup: list virtual servers: %w", err)
	}
	var errs []error
	for _, s := range svcs {
		if s.FWMark == 0 && b.cfg.excluded(addrOf(s.Address)) {
			continue // --ipvs-exclude-cidrs
		}
		if err := ignoreMissing(b.k.IPVS.DelService(s)); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: delete virtual server: %w", err))
		}
	}
	return errors.Join(errs...)
}

// cleanupSets destroys the sets of every family that exist (a set still
// referenced by someone else's rule cannot go: that is reported).
func (b *Backend) cleanupSets(ctx context.Context) error {
	saved, err := b.k.IPSet.Save(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: ipset save: %w", err)
	}
	have, err := ipset.ParseSave(saved)
	if err != nil {
		return fmt.Errorf("cleanup: ipset save: %w", err)
	}
	var data []byte
	for _, f := range b.cfg.families() {
		for _, kind := range allSets() {
			if _, ok := have[kind.name(f)]; ok {
				data = append(data, "destroy "+kind.name(f)+"\n"...)
			}
		}
	}
	if len(data) == 0 {
		return nil
	}
	if err := b.k.IPSet.Restore(ctx, data); err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
