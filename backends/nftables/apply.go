package nftables

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/reconcile"
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
	// stamp is the ruleset generation after our last commit, kept by
	// reconcile.Stamp's rule.
	stamp reconcile.Stamp
	// verifiedAt is when the table was last checked or fully written.
	verifiedAt time.Time
	// restarted holds until a full sync succeeds: the table, if any, is
	// a predecessor's, whose tags the full sync trusts to leave alone
	// what already holds what it renders. A later full sync (a repair:
	// the table changed behind the daemon's back) rewrites everything.
	restarted bool
}

func newFamilySync(fc *familyConfig) *familySync {
	f := &familySync{fc: fc, needFull: true, restarted: true}
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
	if !existing.Foreign && !holdsForeignObjects(existing) {
		idle := notLive(f.fc, existing)
		plan := chunkPlan{names: names, recreate: exists && idle, live: exists && !idle, existing: existing}
		if plan.live && f.restarted {
			plan.kept, plan.elements = f.readLive(ctx, conn, existing.Sets)
		}
		f.allocateGroups(st, names, plan.kept)
		f.adoptOrders(plan.elements)
		return f.fullChunked(ctx, conn, st, plan)
	}
	f.allocateGroups(st, names, nil)
	return f.replaceForeign(ctx, conn, st, names, existing)
}

// readLive reads the live table's sets back (see liveSet), so that a
// full sync over it (a restart, a repair) leaves alone what already holds
// what it renders, and the tags of the chains the verdict maps go to
// (see ruleset.ChainTag). A set that cannot be read is logged and written
// whole.
func (f *familySync) readLive(ctx context.Context, conn Conn, existingSets []string) (chainTags, map[string]*liveSet) {
	sets := f.readSets(ctx, conn, existingSets)
	chains := chainTags{}
	for _, name := range []string{setServiceIPs, setServiceNodePorts, setFirewallIPs} {
		if ls := sets[name]; ls != nil {
			ls.tags(chains)
		} else {
			return nil, sets // chains it sends to are unknown: rewrite them all
		}
	}
	return chains, sets
}

// allocateGroups numbers the state's endpoint groups for a full sync,
// which rewrites every map and every rule referring to one. Over a live
// table whose chain tags name their groups (live), the groups keep those
// identifiers where adoptGroups allows, so its chains stay as they are;
// otherwise they are numbered afresh, densely in service order:
// identifiers freed by deletions since the last full sync leave no empty
// maps behind, and the maps' width (perMap) follows the number of groups.
// Each group keeps its endpoint order.
func (f *familySync) allocateGroups(st *proxier.State, names []proxier.ServicePortName, live chainTags) {
	each := func(fn func(groupKey)) {
		for _, name := range names {
			for _, k := range f.fc.groupsOf(st.Services[name]) {
				fn(k)
			}
		}
	}
	n := 0
	each(func(groupKey) { n++ })
	old, oldOrders := f.ids, f.orders
	ids := adoptGroups(each, n, live, groupsPerMap(n))
	if ids == nil {
		ids = newGroupIDs()
		ids.ids = newGroupTable(n)
		ids.perMap = groupsPerMap(n)
	}
	orders := make(groupOrders, 0, n)
	each(func(k groupKey) {
		id := ids.ensure(k)
		if was, ok := old.lookup(k); ok {
			orders.set(id, oldOrders.get(was))
		}
	})
	f.ids, f.orders = ids, orders
}

// adoptOrders takes, for each group without a known endpoint order, the
// order its slot block in the live table holds, so that its ranges are
// kept where its endpoints are the same.
func (f *familySync) adoptOrders(live map[string]*liveSet) {
	f.ids.ids.all(func(id uint32) {
		if f.orders.get(id) != nil {
			return
		}
		if ls := live[f.ids.mapOf(id)]; ls != nil {
			if order := ls.order(f.ids.offset(id)); len(order) > 0 {
				f.orders.set(id, order)
			}
		}
	})
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
	// deletes are elements of the live table to delete before elements
	// are added (a full sync over it).
	deletes map[string][]ruleset.Element
	hairpin *addrCounts
}

// fresh drops the hairpin set's elements of addresses already written:
// that set gets each address once.
func (d *desiredTable) fresh(set string, els []ruleset.Element) []ruleset.Element {
	if set != setHairpin {
		return els
	}
	out := els[:0:0]
	for _, e := range els {
		if d.hairpin.inc(e.Key[0].Addr) == 1 {
			out = append(out, e)
		}
	}
	return out
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
		w.rules.set(c.Name, len(c.Rules))
	}
}
