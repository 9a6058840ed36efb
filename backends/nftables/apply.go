package nftables

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// familySync holds what the backend wrote into one family's table.
type familySync struct {
	fc       *familyConfig
	ids      *groupIDs
	orders   map[groupKey][]netip.AddrPort
	ports    map[proxier.ServicePortName]*installedPort
	refs     elementRefs
	sets     map[string]*ruleset.Set // sets written, by name
	base     map[string]chainMark    // table-wide chains written
	needFull bool
	// generation is the ruleset generation after our last commit.
	generation uint32
}

func newFamilySync(fc *familyConfig) *familySync {
	f := &familySync{fc: fc, needFull: true}
	f.reset()
	return f
}

// reset forgets what was written (after Cleanup, or before a full sync
// that rewrites it).
func (f *familySync) reset() {
	f.ids, f.orders = newGroupIDs(), map[groupKey][]netip.AddrPort{}
	f.ports, f.refs = map[proxier.ServicePortName]*installedPort{}, elementRefs{}
	f.sets, f.base = map[string]*ruleset.Set{}, map[string]chainMark{}
}

func (f *familySync) renderer(node proxier.NodeInfo) *portRenderer {
	return &portRenderer{fc: f.fc, node: node, ids: f.ids, orders: f.orders}
}

// syncResult reports one family's sync.
type syncResult struct {
	full                  bool
	rules, added, deleted int
}

// full rewrites the whole table in one transaction: every chain it holds
// is flushed and refilled, every set but the affinity map flushed and
// refilled, and what is no longer wanted deleted. Chains and sets come
// first, then rules, then elements: a rule that binds a map walks its
// elements, so binding empty maps keeps the load linear.
func (f *familySync) full(ctx context.Context, conn Conn, st *proxier.State) (syncResult, error) {
	existing, _, err := conn.ListObjects(ctx, f.fc.nft, TableName)
	if err != nil {
		return syncResult{}, fmt.Errorf("listing table %s %s: %w", f.fc.nft, TableName, err)
	}
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
	d := f.renderAll(st)
	tx := ruleset.NewTransaction(f.fc.nft, TableName)
	tx.AddTable()
	d.write(tx, existing)
	if err := conn.Run(ctx, tx); err != nil {
		return syncResult{full: true}, err
	}
	f.commitFull(d)
	rules, added, deleted := tx.Counts()
	return syncResult{full: true, rules: rules, added: added, deleted: deleted}, nil
}

// desiredTable is a whole render of one family.
type desiredTable struct {
	chains []*ruleset.Chain // base chains first, then per port in order
	sets   []*ruleset.Set
	ports  map[proxier.ServicePortName]*portObjects
	groups map[proxier.ServicePortName][]groupKey
	orders map[groupKey][]netip.AddrPort
	refs   elementRefs
}

func (f *familySync) renderAll(st *proxier.State) *desiredTable {
	d := &desiredTable{chains: baseChains(f.fc), sets: baseSets(f.fc),
		ports: map[proxier.ServicePortName]*portObjects{}, groups: map[proxier.ServicePortName][]groupKey{},
		orders: map[groupKey][]netip.AddrPort{}, refs: elementRefs{}}
	for i := range f.ids.mapCount() {
		d.sets = append(d.sets, endpointMapSet(endpointMap(i*groupsPerMap)))
	}
	setsByName := map[string]*ruleset.Set{}
	for _, s := range d.sets {
		setsByName[s.Name] = s
	}
	delta := newRefDelta(d.refs, setsByName)
	r := f.renderer(st.Node)
	for _, name := range sortedNames(st.Services) {
		o := r.render(st.Services[name], st.Endpoints[name])
		if o == nil {
			continue
		}
		d.ports[name], d.groups[name] = o, groupsOf(st.Services[name])
		d.chains = append(d.chains, o.chains...)
		d.sets = append(d.sets, o.sets...)
		mergeOrders(d.orders, o.orders)
		delta.diff(nil, o.elements)
	}
	delta.commit()
	return d
}

func (d *desiredTable) write(tx *ruleset.Transaction, existing TableObjects) {
	wantChain, wantSet := map[string]bool{}, map[string]bool{}
	for _, c := range existing.Chains {
		tx.FlushChain(c)
	}
	for _, s := range existing.Sets {
		if !isAffinitySet(s) { // clients keep their endpoint across a rewrite
			tx.FlushSet(s)
		}
	}
	for _, s := range d.sets {
		tx.AddSet(s)
		wantSet[s.Name] = true
	}
	for _, c := range d.chains {
		tx.AddChain(c)
		wantChain[c.Name] = true
	}
	for _, c := range existing.Chains {
		if !wantChain[c] {
			tx.DeleteChain(c)
		}
	}
	for _, s := range existing.Sets {
		if !wantSet[s] {
			tx.DeleteSet(s)
		}
	}
	for _, c := range d.chains {
		for _, r := range c.Rules {
			tx.AddRule(c.Name, r)
		}
	}
	for _, s := range d.sets {
		els := make([]ruleset.Element, 0, len(d.refs[s.Name]))
		for _, r := range d.refs[s.Name] {
			els = append(els, r.el)
		}
		tx.AddElements(s, els)
	}
}

func (f *familySync) commitFull(d *desiredTable) {
	f.ports, f.refs, f.orders = map[proxier.ServicePortName]*installedPort{}, d.refs, d.orders
	f.sets, f.base = map[string]*ruleset.Set{}, map[string]chainMark{}
	for _, s := range d.sets {
		f.sets[s.Name] = s
	}
	for name, o := range d.ports {
		f.ports[name] = newInstalledPort(f.fc.nft, o, d.groups[name])
	}
	for _, c := range baseChains(f.fc) {
		f.base[c.Name] = fingerprint(f.fc.nft, c)
	}
	f.needFull = false
}
