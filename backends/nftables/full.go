package nftables

import (
	"context"
	"fmt"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// full rewrites the whole table, in chunks (chunked.go): committed one by
// one while no hook reaches it, else as one transaction. Another
// program's table (kube-proxy's) is replaced through the handover table
// (handover.go).
func (f *familySync) full(ctx context.Context, conn Conn, st *proxier.State) (syncResult, error) {
	existing, exists, err := conn.ListObjects(ctx, f.fc.nft, TableName)
	if err != nil {
		return syncResult{}, fmt.Errorf("listing table %s %s: %w", f.fc.nft, TableName, err)
	}
	names := sortedNames(st.Services)
	if existing.Foreign || holdsForeignObjects(existing) {
		f.allocateGroups(st, names, nil)
		write := func(plan chunkPlan) error {
			_, err := writeChunked(ctx, conn, f.renderer(st.Node), st, plan)
			return err
		}
		if err := replaceForeign(ctx, conn, f.fc.nft, names, existing, write); err != nil {
			return syncResult{full: true}, err
		}
		return f.fullChunked(ctx, conn, st, chunkPlan{names: names})
	}
	idle := notLive(f.fc, existing)
	plan := chunkPlan{names: names, recreate: exists && idle, live: exists && !idle, existing: existing}
	if plan.live && f.restarted {
		plan.kept, plan.elements = f.readLive(ctx, conn, existing.Sets)
	}
	f.allocateGroups(st, names, plan.kept)
	f.adoptOrders(plan.elements)
	return f.fullChunked(ctx, conn, st, plan)
}

// readLive reads the live table's sets back (see liveSet), so that a
// full sync over it (a restart, a repair) leaves alone what already holds
// what it renders, and the tags of the chains the verdict maps go to
// (see ruleset.ChainTag). A set that cannot be read is logged and written
// whole.
func (f *familySync) readLive(ctx context.Context, conn Conn, existingSets []string) (chainTags, map[string]*liveSet) {
	sets := readSets(ctx, conn, f.fc, existingSets)
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

// fullChunked writes the table (writeChunked) and, once it is in force,
// takes what it wrote as the record the next partial syncs start from,
// and deletes a handover table left behind.
func (f *familySync) fullChunked(ctx context.Context, conn Conn, st *proxier.State, plan chunkPlan) (syncResult, error) {
	c, err := writeChunked(ctx, conn, f.renderer(st.Node), st, plan)
	if err != nil {
		return c.result(), err
	}
	f.w, f.orders, f.needFull, f.restarted = c.w, c.orders, false, false
	closeHandover(ctx, conn, f.fc.nft)
	return c.result(), nil
}
