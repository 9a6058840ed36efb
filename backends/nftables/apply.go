package nftables

import (
	"context"
	"fmt"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// familySync holds what the backend wrote into one family's table.
type familySync struct {
	fc     *familyConfig
	ids    *groupIDs
	orders groupOrders
	w      *written
	// needFull is set until a full sync succeeds (first sync, failures).
	needFull bool
	// generation is the ruleset generation after our last commit.
	generation uint32
}

func newFamilySync(fc *familyConfig) *familySync {
	f := &familySync{fc: fc, needFull: true}
	f.reset()
	return f
}

// reset forgets what was written (after Cleanup).
func (f *familySync) reset() {
	f.ids, f.orders, f.w = newGroupIDs(), nil, newWritten()
}

func (f *familySync) renderer(node proxier.NodeInfo) *portRenderer {
	return &portRenderer{fc: f.fc, node: node, ids: f.ids, orders: f.orders, local: f.fc.localMatch(node)}
}

// syncResult reports one family's sync.
type syncResult struct {
	full                  bool
	rules, added, deleted int
}

// full rewrites the whole table, in chunks (fullChunked): committed one by
// one while no hook reaches it, else as one transaction. Another
// program's table (kube-proxy's) is replaced through the handover table
// (replaceForeign).
func (f *familySync) full(ctx context.Context, conn Conn, st *proxier.State) (syncResult, error) {
	existing, exists, err := conn.ListObjects(ctx, f.fc.nft, TableName)
	if err != nil {
		return syncResult{}, fmt.Errorf("listing table %s %s: %w", f.fc.nft, TableName, err)
	}
	names := sortedNames(st.Services)
	f.allocateGroups(st, names)
	if !existing.Foreign && !holdsForeignObjects(existing) {
		idle := notLive(f.fc, existing)
		return f.fullChunked(ctx, conn, st, chunkPlan{names: names, recreate: exists && idle, live: exists && !idle, existing: existing})
	}
	return f.replaceForeign(ctx, conn, st, names, existing)
}

// allocateGroups numbers the state's endpoint groups afresh, densely in
// service order, for a full sync (which rewrites every map and every rule
// referring to one): identifiers freed by deletions since the last full
// sync leave no empty maps behind, and the maps' width (perMap) follows
// the number of groups. Each group keeps its endpoint order.
func (f *familySync) allocateGroups(st *proxier.State, names []proxier.ServicePortName) {
	old, oldOrders := f.ids, f.orders
	ids := newGroupIDs()
	ids.ids = make(map[groupKey]uint32, len(names))
	orders := make(groupOrders, 0, len(names))
	for _, name := range names {
		for _, k := range f.fc.groupsOf(st.Services[name]) {
			id := ids.ensure(k)
			if was, ok := old.lookup(k); ok {
				orders.set(id, oldOrders.get(was))
			}
		}
	}
	ids.perMap = groupsPerMap(len(ids.ids))
	f.ids, f.orders = ids, orders
}

// releaseGroup frees a group's identifier and forgets its order.
func (f *familySync) releaseGroup(k groupKey) {
	if id, ok := f.ids.lookup(k); ok {
		f.orders.drop(id)
		f.ids.release(k)
	}
}

// desiredTable is a render, or a chunk of one, of one family.
type desiredTable struct {
	chains   []*ruleset.Chain // table-wide chains first, then per port in order
	sets     []*ruleset.Set
	elements map[string][]ruleset.Element
	hairpin  *addrCounts
}

// addElements collects elements, the hairpin set's once per address.
func (d *desiredTable) addElements(set string, els []ruleset.Element) {
	for _, e := range els {
		if set == setHairpin {
			a := e.Key[0].Addr
			if d.hairpin.inc(a) > 1 {
				continue
			}
		}
		d.elements[set] = append(d.elements[set], e)
	}
}

// add counts what a render (or a chunk of one) writes: its sets, the
// elements it adds to every set, the rules of its chains.
func (w *written) add(d *desiredTable) {
	for _, s := range d.sets {
		w.sets[s.Name] = s
		if _, ok := w.counts[s.Name]; !ok && !s.Dynamic {
			w.counts[s.Name] = 0 // counted even while empty
		}
	}
	for name, els := range d.elements {
		if s := w.sets[name]; s != nil && !s.Dynamic {
			w.counts[name] += len(els)
		}
	}
	for _, c := range d.chains {
		w.rules[c.Name] = len(c.Rules)
	}
}
