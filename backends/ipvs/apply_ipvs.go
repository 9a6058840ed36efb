package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"

	"github.com/moby/ipvs"
)

// listServices reads every virtual server the kernel has.
func (b *Backend) listServices() (map[vsKey]*ipvs.Service, error) {
	svcs, err := b.k.IPVS.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	out := make(map[vsKey]*ipvs.Service, len(svcs))
	for _, s := range svcs {
		if k, ok := keyOf(s); ok {
			out[k] = s
		}
	}
	return out, nil
}

// sortedKeys orders keys by their string form (formatted once each).
func sortedKeys(keys map[vsKey]struct{}) []vsKey {
	type named struct {
		k vsKey
		s string
	}
	list := make([]named, 0, len(keys))
	for k := range keys {
		list = append(list, named{k, k.String()})
	}
	slices.SortFunc(list, func(a, b named) int { return cmpString(a.s, b.s) })
	out := make([]vsKey, len(list))
	for i, n := range list {
		out[i] = n.k
	}
	return out
}

// readService reads one virtual server from the kernel; nil if absent.
func (b *Backend) readService(k vsKey) (*ipvs.Service, error) {
	s, err := b.k.IPVS.GetService(k.handle())
	if isMissing(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read virtual server: %w", err)
	}
	return s, nil
}

// syncServers makes the kernel's virtual servers match the model: (full)
// for every key the model or the kernel has, listing them all; else for
// the keys given, reading each. Switchyard owns IPVS on the node, like kube-proxy: a full sync
// deletes virtual servers nobody wants, except those on ExcludeCIDRs. It lists the kernel and changes
// only what differs; it never flushes.
func (b *Backend) syncServers(keys map[vsKey]struct{}, full bool) (int, error) {
	var kernel map[vsKey]*ipvs.Service
	if full {
		var err error
		if kernel, err = b.listServices(); err != nil {
			return 0, err
		}
		keys = b.model.serverKeys()
		for k := range kernel {
			if k.Mark == 0 && b.cfg.excluded(k.Addr) {
				continue // --ipvs-exclude-cidrs: not ours to clean up
			}
			keys[k] = struct{}{}
		}
	}
	sorted := sortedKeys(keys)
	var errs []error
	for _, k := range sorted {
		have, err := kernel[k], error(nil)
		if !full {
			have, err = b.readService(k)
		}
		if err == nil {
			err = b.syncServer(k, b.model.server(k), have)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("virtual server %s: %w", k, err))
		}
	}
	return len(sorted), errors.Join(errs...)
}

func (b *Backend) syncServer(k vsKey, want *virtualServer, have *ipvs.Service) error {
	switch {
	case want == nil && have == nil:
		return nil
	case want == nil:
		b.graceful.forgetServer(k)
		return ignoreMissing(b.k.IPVS.DelService(k.handle()))
	case have == nil:
		err := b.k.IPVS.NewService(want.service())
		if errors.Is(err, syscall.EEXIST) {
			// Listed a moment ago without it: another writer. Reconcile it.
			return b.updateServer(want, nil)
		}
		if err != nil {
			return err
		}
		return b.addDests(want, want.Dests)
	}
	return b.updateServer(want, have)
}

// updateServer fixes an existing virtual server's options (have nil:
// unknown) and real servers.
func (b *Backend) updateServer(want *virtualServer, have *ipvs.Service) error {
	if have == nil || !want.serviceMatches(have) {
		if err := b.k.IPVS.UpdateService(want.service()); err != nil {
			return err
		}
	}
	dests, err := b.k.IPVS.GetDestinations(want.Key.handle())
	if err != nil {
		return fmt.Errorf("list real servers: %w", err)
	}
	wanted := map[netip.AddrPort]bool{}
	for _, ap := range want.Dests {
		wanted[ap] = true
	}
	present := map[netip.AddrPort]*ipvs.Destination{}
	var errs []error
	for _, d := range dests {
		ap, ok := destKey(d)
		if !ok {
			continue
		}
		present[ap] = d
		if !wanted[ap] {
			errs = append(errs, b.retire(want.Key, d))
		}
	}
	var missing []netip.AddrPort
	for _, ap := range want.Dests {
		d, ok := present[ap]
		switch {
		case !ok:
			missing = append(missing, ap)
		case d.Weight != 1 || d.ConnectionFlags&ipvs.ConnectionFlagFwdMask != ipvs.ConnectionFlagMasq:
			b.graceful.remove(want.Key, ap)
			errs = append(errs, b.k.IPVS.UpdateDestination(want.Key.handle(), destination(ap, 1)))
		}
	}
	errs = append(errs, b.addDests(want, missing))
	return errors.Join(errs...)
}

func (b *Backend) addDests(want *virtualServer, dests []netip.AddrPort) error {
	var errs []error
	for _, ap := range dests {
		err := b.k.IPVS.NewDestination(want.Key.handle(), destination(ap, 1))
		if errors.Is(err, syscall.EEXIST) {
			err = b.k.IPVS.UpdateDestination(want.Key.handle(), destination(ap, 1))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("add real server %s: %w", ap, err))
		}
	}
	return errors.Join(errs...)
}
