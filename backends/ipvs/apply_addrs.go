package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
)

// syncAddresses binds the wanted service addresses to kube-ipvs0 and
// unbinds the others: listing the interface on a full sync, only the
// touched addresses otherwise.
func (b *Backend) syncAddresses(t *touched, full bool) error {
	nl := b.k.Netlink
	var errs []error
	if full {
		if err := nl.EnsureDummy(DummyInterface); err != nil {
			return err
		}
		have, err := nl.ListAddresses(DummyInterface)
		if err != nil {
			return err
		}
		present := map[netip.Addr]bool{}
		for _, a := range have {
			present[a] = true
			if !b.model.wantsAddr(a) && !a.IsLinkLocalUnicast() && !b.cfg.excluded(a) {
				errs = append(errs, nl.DelAddress(DummyInterface, a))
			}
		}
		for a := range b.model.addrs {
			if !present[a] {
				errs = append(errs, nl.AddAddress(DummyInterface, a))
			}
		}
		return wrapErr("addresses", errors.Join(errs...))
	}
	for a := range t.addrs {
		if b.model.wantsAddr(a) {
			errs = append(errs, nl.AddAddress(DummyInterface, a))
		} else {
			errs = append(errs, nl.DelAddress(DummyInterface, a))
		}
	}
	return wrapErr("addresses", errors.Join(errs...))
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
