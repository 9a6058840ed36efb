package nftables

import (
	"context"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// portChange is the staged outcome of re-rendering one service port.
type portChange struct {
	name     proxier.ServicePortName
	obj      *portObjects // nil: the port is gone from this family
	groups   []groupKey
	released []groupKey
}

// partial re-renders only the service ports the diff names and writes the
// difference in one transaction. An endpoint that appears, goes or
// changes readiness changes elements only; a service port that appears,
// goes or changes its spec also adds, rewrites or deletes its chains.
func (f *familySync) partial(ctx context.Context, conn Conn, st *proxier.State, diff *proxier.Diff) (syncResult, error) {
	mapsBefore := f.ids.mapCount()
	changes := f.stageChanges(st, diff)
	tx := ruleset.NewTransaction(f.fc.nft, TableName)
	for i := mapsBefore; i < f.ids.mapCount(); i++ {
		s := endpointMapSet(endpointMap(i * groupsPerMap))
		f.sets[s.Name] = s
		tx.AddSet(s)
	}
	newSets, goneSets := f.portSetChanges(changes)
	for _, s := range newSets {
		f.sets[s.Name] = s
		tx.AddSet(s)
	}
	delta := newRefDelta(f.refs, f.sets)
	f.writeChanges(tx, changes, delta)
	for _, name := range goneSets {
		tx.DeleteSet(name)
	}
	if err := conn.Run(ctx, tx); err != nil {
		f.rollback(changes)
		return syncResult{}, err
	}
	delta.commit()
	for _, c := range changes {
		f.commitPort(c)
	}
	for _, name := range goneSets {
		delete(f.sets, name)
	}
	rules, added, deleted := tx.Counts()
	return syncResult{rules: rules, added: added, deleted: deleted}, nil
}

// portSetChanges lists the ports' sets to create and, after their rules
// are gone, to delete.
func (f *familySync) portSetChanges(changes []portChange) (added []*ruleset.Set, gone []string) {
	wanted := map[string]bool{}
	for _, c := range changes {
		if c.obj == nil {
			continue
		}
		for _, s := range c.obj.sets {
			wanted[s.Name] = true
			if f.sets[s.Name] == nil {
				added = append(added, s)
			}
		}
	}
	for _, c := range changes {
		for _, s := range f.installed(c.name).sets {
			if !wanted[s.Name] {
				gone = append(gone, s.Name)
			}
		}
	}
	return added, gone
}

// stageChanges allocates groups for new ports and renders changed ones.
func (f *familySync) stageChanges(st *proxier.State, diff *proxier.Diff) []portChange {
	r := f.renderer(st.Node)
	var out []portChange
	for _, name := range sortedNames(diff.Changed) {
		c := portChange{name: name}
		if sp := st.Services[name]; sp != nil {
			c.groups = groupsOf(sp)
			for _, k := range c.groups {
				f.ids.ensure(k)
			}
			c.obj = r.render(sp, st.Endpoints[name])
		}
		if old := f.ports[name]; old != nil {
			for _, k := range old.groups {
				if !slices.Contains(c.groups, k) {
					c.released = append(c.released, k)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// writeChanges appends the operations in an order the kernel accepts:
// new chains, rewritten rules, element deletions then additions (a map
// element may name a new chain, or stop naming an old one), and last the
// chains no longer wanted.
func (f *familySync) writeChanges(tx *ruleset.Transaction, changes []portChange, delta *refDelta) {
	var removed []string
	for _, c := range changes {
		old := f.installed(c.name)
		for _, ch := range c.chains() {
			switch fp, ok := old.chains[ch.Name]; {
			case !ok:
				tx.AddChain(ch)
			case fp == fingerprint(f.fc.nft, ch):
				continue
			default:
				tx.FlushChain(ch.Name)
			}
			for _, r := range ch.Rules {
				tx.AddRule(ch.Name, r)
			}
		}
		var cur map[string][]ruleset.Element
		if c.obj != nil {
			cur = c.obj.elements
		}
		delta.diff(old.elements, cur)
		for name := range old.chains {
			if !slices.ContainsFunc(c.chains(), func(ch *ruleset.Chain) bool { return ch.Name == name }) {
				removed = append(removed, name)
			}
		}
	}
	delta.write(tx)
	slices.Sort(removed)
	for _, name := range removed {
		tx.FlushChain(name)
	}
	for _, name := range removed {
		tx.DeleteChain(name)
	}
}

func (c *portChange) chains() []*ruleset.Chain {
	if c.obj == nil {
		return nil
	}
	return c.obj.chains
}

// installed returns what was written for a port (empty if nothing).
func (f *familySync) installed(name proxier.ServicePortName) *installedPort {
	if ip := f.ports[name]; ip != nil {
		return ip
	}
	return &installedPort{}
}

func (f *familySync) commitPort(c portChange) {
	for _, k := range c.released {
		f.ids.release(k)
		delete(f.orders, k)
	}
	if c.obj == nil {
		delete(f.ports, c.name)
		for _, k := range c.groups {
			f.ids.release(k)
			delete(f.orders, k)
		}
		return
	}
	f.ports[c.name] = newInstalledPort(f.fc.nft, c.obj, c.groups)
	mergeOrders(f.orders, c.obj.orders)
}

// rollback releases groups allocated for ports the kernel never got.
func (f *familySync) rollback(changes []portChange) {
	for _, c := range changes {
		old := f.ports[c.name]
		for _, k := range c.groups {
			if old == nil || !slices.Contains(old.groups, k) {
				f.ids.release(k)
			}
		}
	}
	f.needFull = true
}
