package nftables

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/synctrace"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// familySync holds what the backend wrote into one family's table.
type familySync struct {
	fc     *familyConfig
	ids    *groupIDs
	orders map[groupKey][]netip.AddrPort
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
	f.ids, f.orders, f.w = newGroupIDs(), map[groupKey][]netip.AddrPort{}, newWritten()
}

func (f *familySync) renderer(node proxier.NodeInfo) *portRenderer {
	return &portRenderer{fc: f.fc, node: node, ids: f.ids, orders: f.orders, local: f.fc.localMatch(node)}
}

// syncResult reports one family's sync.
type syncResult struct {
	full                  bool
	rules, added, deleted int
}

// full rewrites the whole table. A table of ours is written in chunks
// (fullChunked): committed one by one while no hook reaches it, else as
// one transaction. Another program's table (kube-proxy's) is replaced
// through the handover table, each in one transaction: chains and sets
// first, then rules, then elements, so that the rules bind empty maps.
func (f *familySync) full(ctx context.Context, conn Conn, st *proxier.State) (syncResult, error) {
	existing, exists, err := conn.ListObjects(ctx, f.fc.nft, TableName)
	if err != nil {
		return syncResult{}, fmt.Errorf("listing table %s %s: %w", f.fc.nft, TableName, err)
	}
	f.allocateGroups(st)
	if !existing.Foreign && !holdsForeignObjects(existing) {
		idle := notLive(f.fc, existing)
		return f.fullChunked(ctx, conn, st, chunkPlan{recreate: exists && idle, live: exists && !idle, existing: existing})
	}
	d := f.renderAll(st)
	if err := f.openHandover(ctx, conn, d, existing); err != nil {
		return syncResult{full: true}, err
	}
	tx := ruleset.NewTransaction(f.fc.nft, TableName)
	tx.DeleteTable()
	tx.AddTable()
	d.write(tx)
	w, orders := f.record(st, d)
	// From here the transaction alone holds the render, and the conn
	// drops each part once it has encoded it.
	d = nil
	tx.SetDisposable()
	synctrace.Mark(ctx, "render")
	err = conn.Run(ctx, tx)
	synctrace.Mark(ctx, "commit")
	if err != nil {
		return syncResult{full: true}, err
	}
	f.w, f.orders, f.needFull = w, orders, false
	f.closeHandover(ctx, conn)
	rules, added, deleted := tx.Counts()
	return syncResult{full: true, rules: rules, added: added, deleted: deleted}, nil
}

// allocateGroups gives every endpoint group of the state an identifier,
// in service order, and frees those of groups gone.
func (f *familySync) allocateGroups(st *proxier.State) {
	ids := f.ids
	keep := map[groupKey]bool{}
	for _, name := range sortedNames(st.Services) {
		for _, k := range groupsOf(st.Services[name]) {
			ids.ensure(k)
			keep[k] = true
		}
	}
	for k := range ids.ids {
		if !keep[k] {
			ids.release(k)
		}
	}
}

// desiredTable is a whole render of one family.
type desiredTable struct {
	chains   []*ruleset.Chain // table-wide chains first, then per port in order
	sets     []*ruleset.Set
	elements map[string][]ruleset.Element
	orders   map[groupKey][]netip.AddrPort
	hairpin  *addrCounts
}

func (f *familySync) renderAll(st *proxier.State) *desiredTable {
	d := &desiredTable{chains: baseChains(f.fc), sets: baseSets(f.fc),
		elements: map[string][]ruleset.Element{}, orders: map[groupKey][]netip.AddrPort{}, hairpin: newAddrCounts()}
	for i := range f.ids.mapCount() {
		d.sets = append(d.sets, endpointMapSet(endpointMap(i*groupsPerMap)))
	}
	r := f.renderer(st.Node)
	for _, name := range sortedNames(st.Services) {
		o := r.render(st.Services[name], st.Endpoints[name])
		if o == nil {
			continue
		}
		d.chains = append(d.chains, o.chains...)
		d.sets = append(d.sets, o.sets...)
		mergeOrders(d.orders, o.orders)
		for set, els := range o.elements {
			d.addElements(set, els)
		}
	}
	return d
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

// write stages a whole render into a table created in the same
// transaction.
func (d *desiredTable) write(tx *ruleset.Transaction) {
	sets := make(map[string]*ruleset.Set, len(d.sets))
	for _, s := range d.sets {
		sets[s.Name] = s
	}
	d.writeChunk(tx, sets)
}

// record describes what a full sync writes, to keep once it committed.
func (f *familySync) record(st *proxier.State, d *desiredTable) (*written, map[groupKey][]netip.AddrPort) {
	w := newWritten()
	w.prev, w.hairpin = st, d.hairpin
	w.add(d)
	return w, d.orders
}

// add counts what a render (or a chunk of one) writes: its sets, the
// elements it adds to every set, the rules of its chains.
func (w *written) add(d *desiredTable) {
	for _, s := range d.sets {
		w.sets[s.Name] = s
		if !s.Dynamic {
			w.counts[s.Name] += 0
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
