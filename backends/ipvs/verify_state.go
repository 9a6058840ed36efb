package ipvs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/moby/ipvs"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// verifySets compares every set's member count with the model's; when
// one moved it diffs the sets as a full sync does (`ipset save`), and the
// lines that put them back go into this sync's restore.
func (b *Backend) verifySets(ctx context.Context, d *damage) error {
	counts, err := b.k.IPSet.Counts(ctx)
	if err != nil {
		return err
	}
	moved := false
	for _, f := range b.cfg.families() {
		for _, kind := range allSets() {
			n, ok := counts[kind.name(f)]
			moved = moved || !ok || n != b.model.setCounts[kind.name(f)]
		}
	}
	if !moved {
		return nil
	}
	lines, err := b.fullSetLines(ctx)
	if err != nil {
		return err
	}
	d.setLines = lines
	stats := setStats(lines)
	for _, f := range b.cfg.families() {
		for _, kind := range allSets() {
			d.note(kindIPSet, f, stats[kind.name(f)].describe(kind.name(f))...)
		}
	}
	return nil
}

// setStat sums up the restore lines of one set.
type setStat struct {
	created  bool
	add, del int
}

func setStats(lines []string) map[string]*setStat {
	out := map[string]*setStat{}
	for _, l := range lines {
		op, rest, _ := strings.Cut(l, " ")
		name, _, _ := strings.Cut(rest, " ")
		st := out[name]
		if st == nil {
			st = &setStat{}
			out[name] = st
		}
		switch op {
		case "create":
			st.created = true
		case "add":
			st.add++
		case "del":
			st.del++
		}
	}
	return out
}

// describe says what the set lost or gained (nil: nothing).
func (st *setStat) describe(name string) []string {
	if st == nil {
		return nil
	}
	var out []string
	if st.created {
		out = append(out, fmt.Sprintf("set %s is gone", name))
	}
	if st.add > 0 {
		out = append(out, fmt.Sprintf("set %s lacks %d entries", name, st.add))
	}
	if st.del > 0 {
		out = append(out, fmt.Sprintf("set %s holds %d entries not written", name, st.del))
	}
	return out
}

// verifyAddresses lists kube-ipvs0 and compares its addresses with the
// model's; a difference makes this sync reconcile it as a full sync does.
func (b *Backend) verifyAddresses(d *damage) error {
	have, err := b.k.Netlink.ListAddresses(DummyInterface)
	if errors.Is(err, ErrLinkNotFound) {
		d.addrs = true
		for _, f := range b.cfg.families() {
			d.note(kindInterface, f, fmt.Sprintf("%s interface %s is gone", f, DummyInterface))
		}
		return nil
	}
	if err != nil {
		return err
	}
	present := make(map[netip.Addr]bool, len(have))
	for _, a := range have {
		present[a] = true
		if !b.model.wantsAddr(a) && !a.IsLinkLocalUnicast() && !b.cfg.excluded(a) {
			d.addrs = true
			d.note(kindInterface, proxier.FamilyOf(a), fmt.Sprintf("address %s on %s was not written", a, DummyInterface))
		}
	}
	missing := map[v1.IPFamily]int{}
	for a := range b.model.addrs {
		if !present[a] {
			missing[proxier.FamilyOf(a)]++
		}
	}
	for f, n := range missing {
		d.addrs = true
		d.note(kindInterface, f, fmt.Sprintf("%d %s addresses missing from %s", n, f, DummyInterface))
	}
	return nil
}

// verifyServers reads the IPVS table once and compares every virtual
// server the model wants (and, as a full sync would, those it does not)
// with it; the keys found different are reconciled by this sync.
func (b *Backend) verifyServers(d *damage) error {
	table, err := b.k.IPVS.ReadTable()
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
	for k := range b.model.owners {
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
		kind, found := b.serverDifferences(b.model.server(k), e)
		if len(found) > 0 {
			d.servers[k] = struct{}{}
			d.note(kind, k.Family, found...)
		}
	}
	for k := range byKey {
		if !b.cfg.excluded(k.Addr) {
			d.servers[k] = struct{}{}
			d.note(kindVirtualServer, k.Family, fmt.Sprintf("virtual server %s was not written", k))
		}
	}
	return nil
}

// serverDifferences compares one virtual server with the kernel's.
// Real servers at weight 0 that the model does not want are draining
// (graceful termination), not differences.
func (b *Backend) serverDifferences(want *virtualServer, have TableEntry) (string, []string) {
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
