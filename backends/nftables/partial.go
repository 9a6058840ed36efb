package nftables

import (
	"context"
	"maps"
	"net/netip"
	"slices"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/synctrace"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// portChange is one changed service port: what was written for it
// (rendered again from what the last sync saw, proxier.Diff.Previous)
// and what is wanted now.
type portChange struct {
	name      proxier.ServicePortName
	old, cur  *portObjects // nil: nothing in this family
	allocated []groupKey   // groups allocated for it by this sync
	released  []groupKey   // groups it no longer uses
}

// partial re-renders only the service ports the diff names and writes the
// difference in one transaction. An endpoint that appears, goes or
// changes readiness changes elements only (except for ports with session
// affinity); a service port that appears, goes or changes its spec also
// adds, rewrites or deletes its chains.
func (f *familySync) partial(ctx context.Context, conn Conn, st *proxier.State, diff *proxier.Diff) (syncResult, error) {
	mapsBefore := f.ids.mapCount()
	changes := f.stageChanges(st, diff)
	tx := ruleset.NewTransaction(f.fc.nft, TableName)
	var newSets []*ruleset.Set
	for i := mapsBefore; i < f.ids.mapCount(); i++ {
		newSets = append(newSets, endpointMapSet(endpointMap(i)))
	}
	added, gone := portSetChanges(changes)
	newSets = append(newSets, added...)
	for _, s := range newSets {
		f.w.sets[s.Name] = s
		tx.AddSet(s)
	}
	d := newDelta(f.w)
	removed := writeChains(tx, f.fc.nft, changes)
	for _, c := range changes {
		d.diff(elementsOf(c.old), elementsOf(c.cur))
	}
	d.write(tx)
	for _, name := range removed {
		tx.FlushChain(name)
	}
	for _, name := range removed {
		tx.DeleteChain(name)
	}
	for _, name := range gone {
		tx.DeleteSet(name)
	}
	synctrace.Mark(ctx, "render")
	if tx.Len() > 0 { // nothing changed: no commit, no new generation
		err := conn.Run(ctx, tx)
		synctrace.Mark(ctx, "commit")
		if err != nil {
			f.rollback(changes, newSets)
			return syncResult{}, err
		}
	}
	f.commitPartial(st, changes, d, removed, gone)
	rules, nAdded, nDeleted := tx.Counts()
	return syncResult{rules: rules, added: nAdded, deleted: nDeleted}, nil
}

// stageChanges allocates groups for new ports and renders each changed
// port as written and as wanted.
func (f *familySync) stageChanges(st *proxier.State, diff *proxier.Diff) []portChange {
	r := f.renderer(st.Node)
	var out []portChange
	for _, name := range sortedNames(diff.Changed) {
		c := portChange{name: name}
		var oldGroups []groupKey
		if sp, eps := diff.Previous(st, name); sp != nil {
			oldGroups = f.fc.groupsOf(sp)
			c.old = f.renderer(*f.w.node).render(sp, eps)
		}
		var curGroups []groupKey
		if sp := st.Services[name]; sp != nil {
			curGroups = f.fc.groupsOf(sp)
			for _, k := range curGroups {
				if _, ok := f.ids.lookup(k); !ok {
					f.ids.ensure(k)
					c.allocated = append(c.allocated, k)
				}
			}
			c.cur = r.render(sp, st.Endpoints[name])
		}
		for _, k := range oldGroups {
			if !slices.Contains(curGroups, k) {
				c.released = append(c.released, k)
			}
		}
		out = append(out, c)
	}
	return out
}

func elementsOf(o *portObjects) map[string][]ruleset.Element {
	if o == nil {
		return nil
	}
	return o.elements
}

func portChainsOf(o *portObjects) []*ruleset.Chain {
	if o == nil {
		return nil
	}
	return o.chains
}

// writeChains adds new chains and rewrites changed ones, and returns the
// chains no longer wanted (deleted last, once nothing refers to them).
func writeChains(tx *ruleset.Transaction, fam ruleset.Family, changes []portChange) []string {
	var removed []string
	for _, c := range changes {
		old := map[string]string{}
		for _, ch := range portChainsOf(c.old) {
			old[ch.Name] = ch.ChainText(fam)
		}
		for _, ch := range portChainsOf(c.cur) {
			text, ok := old[ch.Name]
			delete(old, ch.Name)
			switch {
			case !ok:
				tx.AddChain(ch)
			case text == ch.ChainText(fam):
				continue
			default:
				tx.FlushChain(ch.Name)
			}
			for _, r := range ch.Rules {
				tx.AddRule(ch.Name, r)
			}
		}
		removed = append(removed, slices.Collect(maps.Keys(old))...)
	}
	slices.Sort(removed)
	return removed
}

// portSetChanges lists the ports' own sets to create and, after their
// rules are gone, to delete.
func portSetChanges(changes []portChange) (added []*ruleset.Set, gone []string) {
	for _, c := range changes {
		had := map[string]bool{}
		if c.old != nil {
			for _, s := range c.old.sets {
				had[s.Name] = true
			}
		}
		if c.cur != nil {
			for _, s := range c.cur.sets {
				if !had[s.Name] {
					added = append(added, s)
				}
				delete(had, s.Name)
			}
		}
		gone = append(gone, slices.Sorted(maps.Keys(had))...)
	}
	return added, gone
}

func (f *familySync) commitPartial(st *proxier.State, changes []portChange, d *delta, removed, gone []string) {
	d.commit()
	for _, c := range changes {
		for _, k := range c.released {
			f.releaseGroup(k)
		}
		if c.cur != nil {
			f.orders.merge(c.cur.orders)
			for _, ch := range c.cur.chains {
				f.w.rules.set(ch.Name, len(ch.Rules))
			}
		}
	}
	for _, name := range removed {
		f.w.rules.del(name)
	}
	for _, name := range gone {
		delete(f.w.sets, name)
		delete(f.w.counts, name)
	}
	f.w.node = &st.Node
}

// rollback releases groups allocated for ports the kernel never got; the
// next sync is full (familySync.sync sets needFull on every failure).
func (f *familySync) rollback(changes []portChange, newSets []*ruleset.Set) {
	for _, c := range changes {
		for _, k := range c.allocated {
			f.releaseGroup(k)
		}
	}
	for _, s := range newSets {
		delete(f.w.sets, s.Name)
	}
}

// releaseGroup frees a group's identifier and forgets its order.
func (f *familySync) releaseGroup(k groupKey) {
	if id, ok := f.ids.lookup(k); ok {
		f.orders.drop(id)
		f.ids.release(k)
	}
}

// delta stages the element changes of one transaction. Elements of the
// hairpin set are shared by every port with the endpoint's address, so
// they are reference-counted; every other element belongs to one port.
type delta struct {
	w       *written
	hairpin map[netip.Addr]int // staged counts of touched addresses
	adds    map[string][]ruleset.Element
	deletes map[string][]ruleset.Element
}

func newDelta(w *written) *delta {
	return &delta{w: w, hairpin: map[netip.Addr]int{},
		adds: map[string][]ruleset.Element{}, deletes: map[string][]ruleset.Element{}}
}

func (d *delta) hairpinCount(a netip.Addr) int {
	if n, ok := d.hairpin[a]; ok {
		return n
	}
	return d.w.hairpin.get(a)
}

// diff records what changes between a port's old and new elements.
func (d *delta) diff(old, cur map[string][]ruleset.Element) {
	for _, set := range slices.Sorted(maps.Keys(old)) {
		for _, e := range subtract(d.w.sets[set], old[set], cur[set]) {
			d.remove(set, e)
		}
	}
	for _, set := range slices.Sorted(maps.Keys(cur)) {
		for _, e := range subtract(d.w.sets[set], cur[set], old[set]) {
			d.add(set, e)
		}
	}
}

func (d *delta) remove(set string, e ruleset.Element) {
	if set == setHairpin {
		a := e.Key[0].Addr
		n := d.hairpinCount(a) - 1
		d.hairpin[a] = n
		if n > 0 {
			return
		}
	}
	d.deletes[set] = append(d.deletes[set], e)
}

func (d *delta) add(set string, e ruleset.Element) {
	if set == setHairpin {
		a := e.Key[0].Addr
		n := d.hairpinCount(a) + 1
		d.hairpin[a] = n
		if n > 1 {
			return
		}
	}
	d.adds[set] = append(d.adds[set], e)
}

// subtract gives the elements of a not in b (same key, same data, same
// tag: an element whose chain changes is written again with its tag).
func subtract(s *ruleset.Set, a, b []ruleset.Element) []ruleset.Element {
	if len(b) == 0 {
		return a
	}
	in := make(map[string]bool, len(b))
	for _, e := range b {
		in[e.Text(s)+e.Tag.Key()] = true
	}
	var out []ruleset.Element
	for _, e := range a {
		if !in[e.Text(s)+e.Tag.Key()] {
			out = append(out, e)
		}
	}
	return out
}

// write appends the element operations: all deletions, then additions
// (a changed element is deleted and added again).
func (d *delta) write(tx *ruleset.Transaction) {
	for _, set := range slices.Sorted(maps.Keys(d.deletes)) {
		tx.DeleteElements(d.w.sets[set], d.deletes[set])
	}
	for _, set := range slices.Sorted(maps.Keys(d.adds)) {
		tx.AddElements(d.w.sets[set], d.adds[set])
	}
}

// commit folds the delta into what was written.
func (d *delta) commit() {
	for a, n := range d.hairpin {
		d.w.hairpin.set(a, n)
	}
	for set, els := range d.deletes {
		d.w.counts[set] -= len(els)
	}
	for set, els := range d.adds {
		d.w.counts[set] += len(els)
	}
}
