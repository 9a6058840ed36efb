package ipvs

import (
	"errors"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// addressApplier binds the service addresses to kube-ipvs0 (over
// Kernel.Netlink) and reads them back. Link-local addresses and those on
// ExcludeCIDRs are never taken away.
type addressApplier struct {
	nl  Netlink
	cfg *Config
}

// sync binds the wanted service addresses to kube-ipvs0 and unbinds the
// others: listing the interface on a full sync (or a repair), only the
// touched addresses otherwise.
func (a addressApplier) sync(m *model, t *touched, full bool) error {
	if full {
		return a.reconcile(m)
	}
	var errs []error
	for addr := range t.addrs {
		if m.wantsAddr(addr) {
			errs = append(errs, a.nl.AddAddress(DummyInterface, addr))
		} else {
			errs = append(errs, a.nl.DelAddress(DummyInterface, addr))
		}
	}
	return wrapErr("addresses", errors.Join(errs...))
}

// reconcile makes sure kube-ipvs0 exists and holds the model's addresses
// and no others of ours.
func (a addressApplier) reconcile(m *model) error {
	if err := a.nl.EnsureDummy(DummyInterface); err != nil {
		return err
	}
	have, err := a.nl.ListAddresses(DummyInterface)
	if err != nil {
		return err
	}
	var errs []error
	present := map[netip.Addr]bool{}
	for _, addr := range have {
		present[addr] = true
		if a.stale(m, addr) {
			errs = append(errs, a.nl.DelAddress(DummyInterface, addr))
		}
	}
	for addr := range m.addrs {
		if !present[addr] {
			errs = append(errs, a.nl.AddAddress(DummyInterface, addr))
		}
	}
	return wrapErr("addresses", errors.Join(errs...))
}

// stale reports whether an address found on kube-ipvs0 is one to take
// away.
func (a addressApplier) stale(m *model, addr netip.Addr) bool {
	return !m.wantsAddr(addr) && !addr.IsLinkLocalUnicast() && !a.cfg.excluded(addr)
}

// verify lists kube-ipvs0 (the listing is the cost; comparing is a map
// lookup each) and compares its addresses with the model's; a missing
// link or any difference makes this sync reconcile it as a full sync
// does.
func (a addressApplier) verify(m *model, d *damage) error {
	have, err := a.nl.ListAddresses(DummyInterface)
	if errors.Is(err, ErrLinkNotFound) {
		d.addrs = true
		for _, f := range a.cfg.families() {
			d.note(kindInterface, f, fmt.Sprintf("%s interface %s is gone", f, DummyInterface))
		}
		return nil
	}
	if err != nil {
		return err
	}
	present := make(map[netip.Addr]bool, len(have))
	for _, addr := range have {
		present[addr] = true
		if a.stale(m, addr) {
			d.addrs = true
			d.note(kindInterface, proxier.FamilyOf(addr), fmt.Sprintf("address %s on %s was not written", addr, DummyInterface))
		}
	}
	missing := map[v1.IPFamily]int{}
	for addr := range m.addrs {
		if !present[addr] {
			missing[proxier.FamilyOf(addr)]++
		}
	}
	for f, n := range missing {
		d.addrs = true
		d.note(kindInterface, f, fmt.Sprintf("%d %s addresses missing from %s", n, f, DummyInterface))
	}
	return nil
}

// cleanup deletes kube-ipvs0 with its addresses.
func (a addressApplier) cleanup() error {
	if err := a.nl.DeleteLink(DummyInterface); err != nil {
		return fmt.Errorf("delete %s: %w", DummyInterface, err)
	}
	return nil
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
