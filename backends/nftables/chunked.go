package nftables

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/synctrace"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// chunkObjects is how many rules and elements one transaction of a
// chunked first sync carries before it is committed. At 10k services x
// 10 endpoints (~250k objects) that is ~30 commits of ~1 MB encoded each,
// instead of one batch of ~85 MB held at once.
var chunkObjects = 8192

// hookedChain tells a base chain (one a hook reaches) from a regular one.
func hookedChain(c *ruleset.Chain) bool { return c.Hook != nil }

// notLive tells whether a table of ours is unreachable: it exists but
// holds none of the chains a hook enters by (a chunked sync that failed
// before its last commit leaves such a table). Such a table, or none at
// all, is written in chunks.
func notLive(fc *familyConfig, objs TableObjects) bool {
	for _, c := range baseChains(fc) {
		if hookedChain(c) && slices.Contains(objs.Chains, c.Name) {
			return false
		}
	}
	return true
}

// fullChunked writes a table nothing reaches yet in several transactions:
// the first creates the table, its shared sets and maps and its regular
// table-wide chains; each then carries the next service ports, up to
// chunkObjects rules and elements; the last adds the chains the hooks
// enter by. Until that last commit no packet sees the table, so the
// ruleset still appears at once, whole; but no step holds more than a
// chunk rendered, staged and encoded. A failure leaves an unreachable
// table, which the next full sync deletes and writes again.
func (f *familySync) fullChunked(ctx context.Context, conn Conn, st *proxier.State, recreate bool) (syncResult, error) {
	c := &chunker{f: f, conn: conn, w: newWritten(), orders: map[groupKey][]netip.AddrPort{}}
	c.w.prev = st
	c.begin(recreate)
	r := f.renderer(st.Node)
	for _, name := range sortedNames(st.Services) {
		o := r.render(st.Services[name], st.Endpoints[name])
		if o == nil {
			continue
		}
		c.add(o.chains, o.sets, o.elements)
		mergeOrders(c.orders, o.orders)
		if c.size >= chunkObjects {
			if err := c.commit(ctx); err != nil {
				return c.result(), err
			}
		}
	}
	var hooked []*ruleset.Chain
	for _, ch := range baseChains(f.fc) {
		if hookedChain(ch) {
			hooked = append(hooked, ch)
		}
	}
	c.add(hooked, nil, nil)
	if err := c.commit(ctx); err != nil {
		return c.result(), err
	}
	f.w, f.orders, f.needFull = c.w, c.orders, false
	f.closeHandover(ctx, conn)
	klog.V(2).InfoS("nftables table written in chunks", "family", f.fc.nft, "transactions", c.commits)
	return c.result(), nil
}

// chunker stages one transaction of a chunked sync at a time, and keeps
// what the whole sync wrote.
type chunker struct {
	f      *familySync
	conn   Conn
	tx     *ruleset.Transaction
	d      *desiredTable // the staged chunk's objects
	size   int           // its rules and elements
	w      *written
	orders map[groupKey][]netip.AddrPort
	// commits and counts tally the committed transactions.
	commits               int
	rules, added, deleted int
}

// begin stages the table, its shared sets and maps and its regular
// table-wide chains.
func (c *chunker) begin(recreate bool) {
	c.next()
	if recreate {
		c.tx.DeleteTable()
	}
	c.tx.AddTable()
	sets := baseSets(c.f.fc)
	for i := range c.f.ids.mapCount() {
		sets = append(sets, endpointMapSet(endpointMap(i*groupsPerMap)))
	}
	var regular []*ruleset.Chain
	for _, ch := range baseChains(c.f.fc) {
		if !hookedChain(ch) {
			regular = append(regular, ch)
		}
	}
	c.add(regular, sets, nil)
}

func (c *chunker) next() {
	c.tx = ruleset.NewTransaction(c.f.fc.nft, TableName)
	c.d = &desiredTable{elements: map[string][]ruleset.Element{}, hairpin: c.w.hairpin}
	c.size = 0
}

// add stages objects; the hairpin set gets each address once.
func (c *chunker) add(chains []*ruleset.Chain, sets []*ruleset.Set, elements map[string][]ruleset.Element) {
	c.d.chains = append(c.d.chains, chains...)
	c.d.sets = append(c.d.sets, sets...)
	for _, ch := range chains {
		c.size += len(ch.Rules)
	}
	for set, els := range elements {
		c.d.addElements(set, els)
		c.size += len(els)
	}
}

// commit writes the staged chunk in one transaction and starts the next.
func (c *chunker) commit(ctx context.Context) error {
	c.w.add(c.d)
	c.d.writeChunk(c.tx, c.w.sets)
	tx := c.tx
	c.d = nil
	tx.SetDisposable()
	synctrace.Mark(ctx, "render")
	err := c.conn.Run(ctx, tx)
	synctrace.Mark(ctx, "commit")
	if err != nil {
		return fmt.Errorf("transaction %d of a chunked sync: %w", c.commits+1, err)
	}
	rules, added, deleted := tx.Counts()
	c.commits++
	c.rules, c.added, c.deleted = c.rules+rules, c.added+added, c.deleted+deleted
	c.next()
	return nil
}

func (c *chunker) result() syncResult {
	return syncResult{full: true, rules: c.rules, added: c.added, deleted: c.deleted}
}

// writeChunk stages a chunk: its sets, its chains, their rules, then its
// elements, of its own sets and of the shared ones named in sets.
func (d *desiredTable) writeChunk(tx *ruleset.Transaction, sets map[string]*ruleset.Set) {
	for _, s := range d.sets {
		tx.AddSet(s)
	}
	for _, ch := range d.chains {
		tx.AddChain(ch)
	}
	for _, ch := range d.chains {
		for _, r := range ch.Rules {
			tx.AddRule(ch.Name, r)
		}
	}
	names := slices.Sorted(maps.Keys(d.elements))
	for _, name := range names {
		if els := d.elements[name]; len(els) > 0 {
			tx.AddElements(sets[name], els)
		}
	}
}
