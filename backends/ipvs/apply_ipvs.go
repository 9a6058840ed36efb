package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"syscall"

	"github.com/moby/ipvs"
)

// ipvsApplier writes and reads back the IPVS table (Kernel.IPVS):
// virtual servers and their real servers. Switchyard owns IPVS on the
// node, like kube-proxy: a full sync deletes virtual servers nobody
// wants, except those on ExcludeCIDRs. It lists the kernel and changes
// only what differs; it never flushes. A real server that leaves while
// it has connections is handed to the graceful-termination tracker.
type ipvsApplier struct {
	h        IPVS
	cfg      *Config
	graceful *gracefulTracker
}

// sync makes the kernel's virtual servers match the model: (full) for
// every key the model or the kernel has, listing them all; else for the
// keys given, reading each. It returns how many it checked.
func (a ipvsApplier) sync(m *model, keys map[vsKey]struct{}, full bool) (int, error) {
	var kernel map[vsKey]*ipvs.Service
	if full {
		var err error
		if kernel, err = a.list(); err != nil {
			return 0, err
		}
		keys = m.serverKeys()
		for k := range kernel {
			if k.Mark == 0 && a.cfg.excluded(k.Addr) {
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
			have, err = a.read(k)
		}
		if err == nil {
			err = a.syncServer(k, m.server(k), have)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("virtual server %s: %w", k, err))
		}
	}
	return len(sorted), errors.Join(errs...)
}

// all reads every virtual server the kernel has.
func (a ipvsApplier) all() ([]*ipvs.Service, error) {
	svcs, err := a.h.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	return svcs, nil
}

// list is all, by key (virtual servers the mode could not have made are
// left out).
func (a ipvsApplier) list() (map[vsKey]*ipvs.Service, error) {
	svcs, err := a.all()
	if err != nil {
		return nil, err
	}
	out := make(map[vsKey]*ipvs.Service, len(svcs))
	for _, s := range svcs {
		if k, ok := keyOf(s); ok {
			out[k] = s
		}
	}
	return out, nil
}

// read reads one virtual server from the kernel; nil if absent.
func (a ipvsApplier) read(k vsKey) (*ipvs.Service, error) {
	s, err := a.h.GetService(k.handle())
	if isMissing(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read virtual server: %w", err)
	}
	return s, nil
}

func (a ipvsApplier) syncServer(k vsKey, want *virtualServer, have *ipvs.Service) error {
	switch {
	case want == nil && have == nil:
		return nil
	case want == nil:
		a.graceful.forgetServer(k)
		return ignoreMissing(a.h.DelService(k.handle()))
	case have == nil:
		err := a.h.NewService(want.service())
		if errors.Is(err, syscall.EEXIST) {
			// Listed a moment ago without it: another writer. Reconcile it.
			return a.update(want, nil)
		}
		if err != nil {
			return err
		}
		return a.addDests(want, want.Dests)
	}
	return a.update(want, have)
}

// update fixes an existing virtual server's options (have nil: unknown)
// and real servers.
func (a ipvsApplier) update(want *virtualServer, have *ipvs.Service) error {
	if have == nil || !want.serviceMatches(have) {
		if err := a.h.UpdateService(want.service()); err != nil {
			return err
		}
	}
	dests, err := a.h.GetDestinations(want.Key.handle())
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
			errs = append(errs, a.graceful.retire(want.Key, d))
		}
	}
	var missing []netip.AddrPort
	for _, ap := range want.Dests {
		d, ok := present[ap]
		switch {
		case !ok:
			missing = append(missing, ap)
		case d.Weight != 1 || d.ConnectionFlags&ipvs.ConnectionFlagFwdMask != ipvs.ConnectionFlagMasq:
			a.graceful.remove(want.Key, ap)
			errs = append(errs, a.h.UpdateDestination(want.Key.handle(), destination(ap, 1)))
		}
	}
	errs = append(errs, a.addDests(want, missing))
	return errors.Join(errs...)
}

func (a ipvsApplier) addDests(want *virtualServer, dests []netip.AddrPort) error {
	var errs []error
	for _, ap := range dests {
		err := a.h.NewDestination(want.Key.handle(), destination(ap, 1))
		if errors.Is(err, syscall.EEXIST) {
			err = a.h.UpdateDestination(want.Key.handle(), destination(ap, 1))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("add real server %s: %w", ap, err))
		}
	}
	return errors.Join(errs...)
}

// verify reads the IPVS table once (ReadTable: /proc/net/ip_vs, where
// GetDestinations costs a netlink round trip per virtual server) and
// compares every virtual server the model wants (and, as a full sync
// would, those it does not) with it; the keys found different are
// reconciled by this sync, as a partial sync does.
func (a ipvsApplier) verify(m *model, d *damage) error {
	table, err := a.h.ReadTable()
	if err != nil {
		return err
	}
	byKey, byMark := map[vsKey]TableEntry{}, map[uint32]TableEntry{}
	for _, e := range table {
		if e.Service.FWMark != 0 {
			byMark[e.Service.FWMark] = e
		} else if k, ok := keyOf(e.Service); ok {
			byKey[k] = e
		}
	}
	for k := range m.owners {
		e, ok := byKey[k]
		if k.Mark != 0 {
			e, ok = byMark[k.Mark]
		}
		delete(byKey, k)
		if !ok {
			d.servers[k] = struct{}{}
			d.note(kindVirtualServer, k.Family, fmt.Sprintf("virtual server %s is gone", k))
			continue
		}
		kind, found := serverDifferences(m.server(k), e)
		if len(found) > 0 {
			d.servers[k] = struct{}{}
			d.note(kind, k.Family, found...)
		}
	}
	for k := range byKey {
		if !a.cfg.excluded(k.Addr) {
			d.servers[k] = struct{}{}
			d.note(kindVirtualServer, k.Family, fmt.Sprintf("virtual server %s was not written", k))
		}
	}
	return nil
}

// serverDifferences compares one virtual server with the kernel's.
// Real servers at weight 0 that the model does not want are draining
// (graceful termination), not differences.
func serverDifferences(want *virtualServer, have TableEntry) (string, []string) {
	s := have.Service
	persistent := s.Flags&flagPersistent != 0
	if s.SchedName != want.Scheduler || persistent != (want.Timeout > 0) || (persistent && s.Timeout != want.Timeout) {
		return kindVirtualServer, []string{fmt.Sprintf("virtual server %s has scheduler %s, persistence %d s", want.Key, s.SchedName, s.Timeout)}
	}
	var found []string
	for _, ap := range want.Dests {
		i := slices.IndexFunc(have.Dests, func(d TableDest) bool { return d.Addr == ap })
		switch {
		case i < 0:
			found = append(found, fmt.Sprintf("real server %s of %s is gone", ap, want.Key))
		case have.Dests[i].Weight != 1 || have.Dests[i].Forward&ipvs.ConnectionFlagFwdMask != ipvs.ConnectionFlagMasq:
			found = append(found, fmt.Sprintf("real server %s of %s has weight %d", ap, want.Key, have.Dests[i].Weight))
		}
	}
	if len(have.Dests) == len(want.Dests) && len(found) == 0 {
		return kindRealServer, nil // same count, every wanted one there: nothing else
	}
	for _, d := range have.Dests {
		if _, ok := slices.BinarySearchFunc(want.Dests, d.Addr, netip.AddrPort.Compare); !ok && d.Weight != 0 {
			found = append(found, fmt.Sprintf("real server %s of %s was not written", d.Addr, want.Key))
		}
	}
	return kindRealServer, found
}

// cleanup deletes every virtual server, except those on ExcludeCIDRs.
func (a ipvsApplier) cleanup() error {
	svcs, err := a.all()
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	var errs []error
	for _, s := range svcs {
		if s.FWMark == 0 && a.cfg.excluded(addrOf(s.Address)) {
			continue // --ipvs-exclude-cidrs
		}
		if err := ignoreMissing(a.h.DelService(s)); err != nil {
			errs = append(errs, fmt.Errorf("cleanup: delete virtual server: %w", err))
		}
	}
	return errors.Join(errs...)
}

// drain deletes the virtual servers of svcs (all, as listed) whose real
// servers carry no connections, except those on ExcludeCIDRs, and
// returns how many stay (Backend.DrainKernelObjects).
func (a ipvsApplier) drain(svcs []*ipvs.Service) (kept int, err error) {
	var errs []error
	for _, s := range svcs {
		if s.FWMark == 0 && a.cfg.excluded(addrOf(s.Address)) {
			continue // --ipvs-exclude-cidrs
		}
		busy, err := a.carriesConnections(s)
		if err != nil || busy {
			kept++
			errs = append(errs, err)
			continue
		}
		if err := ignoreMissing(a.h.DelService(s)); err != nil {
			errs = append(errs, fmt.Errorf("delete virtual server: %w", err))
		}
	}
	return kept, errors.Join(errs...)
}

// carriesConnections reports whether a real server of s has connections.
func (a ipvsApplier) carriesConnections(s *ipvs.Service) (bool, error) {
	dests, err := a.h.GetDestinations(s)
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

// isMissing reports the kernel's "no such service / destination".
func isMissing(err error) bool {
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT)
}

func ignoreMissing(err error) error {
	if isMissing(err) {
		return nil
	}
	return err
}
