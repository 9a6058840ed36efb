package nftables

import (
	"context"
	"fmt"
	"maps"
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
	for _, c := range baseChains(fc, proxier.LocalMatch{}) {
		if hookedChain(c) && slices.Contains(objs.Chains, c.Name) {
			return false
		}
	}
	return true
}

// chunkPlan says how a full sync of a table of ours is cut.
type chunkPlan struct {
	// names are the state's service ports in the order they are written.
	names []proxier.ServicePortName
	// table is the table written: TableName unless set (HandoverTable).
	table string
	// recreate deletes the table first: it exists but no hook reaches it.
	recreate bool
	// live: hooks reach the table. Its chunks are then staged (Append)
	// and committed as one transaction by the last, which begins by
	// flushing existing's chains and sets (but the affinity sets) and
	// ends by deleting what is no longer wanted.
	live     bool
	existing TableObjects
	// kept are the tags of the live table's chains: when set, a service
	// port's chain whose tag's print is the render's is left as it is,
	// and only the others are flushed and written again.
	kept chainTags
	// elements are the live table's sets read back: a set here is not
	// flushed; only the elements that differ are written (liveSet.diff).
	elements map[string]*liveSet
}

// writeChunked writes the whole table into plan's table a service port
// at a time, each chunk carrying up to chunkObjects rules and elements.
// The first chunk creates the table, its shared sets and maps and its
// regular table-wide chains; the last adds the chains the hooks enter by.
//
// A table nothing reaches yet (none, or one a failed sync left) gets a
// commit per chunk: until the last no packet sees it, so the ruleset still
// appears at once, whole; a failure leaves an unreachable table, which the
// next full sync deletes and writes again. A live table gets one
// transaction, its chunks encoded as they are rendered (Conn.Append), so
// the rules in force change at once. Either way no step holds the whole
// table rendered. The chunker returned holds what was written.
func writeChunked(ctx context.Context, conn Conn, r *portRenderer, st *proxier.State, plan chunkPlan) (*chunker, error) {
	if plan.table == "" {
		plan.table = TableName
	}
	c := &chunker{r: r, conn: conn, plan: plan, w: newWritten(), orders: make(groupOrders, 0, r.ids.next)}
	c.w.node = &st.Node
	c.begin()
	for _, name := range plan.names {
		o := r.render(st.Services[name], st.Endpoints[name])
		if o == nil {
			continue
		}
		c.add(c.keep(o), o.sets, o.elements)
		c.orders.merge(o.orders)
		if c.size >= chunkObjects {
			if err := c.commit(ctx, false); err != nil {
				return c, err
			}
		}
	}
	c.end()
	if err := c.commit(ctx, true); err != nil {
		return c, err
	}
	klog.V(2).InfoS("nftables table written in chunks", "family", r.fc.nft, "table", plan.table, "live", plan.live,
		"chunks", c.chunks, "chainsKept", c.kept, "elementsKept", c.keptElements)
	return c, nil
}

// chunker stages one transaction of a chunked sync at a time, and keeps
// what the whole sync wrote.
type chunker struct {
	r      *portRenderer // the family's, for this sync's node
	conn   Conn
	plan   chunkPlan
	tx     *ruleset.Transaction
	d      *desiredTable // the staged chunk's objects
	size   int           // its rules and elements
	w      *written
	orders groupOrders
	// existing names the live table's chains (plan.kept set).
	existing map[string]bool
	// chunks and counts tally the chunks written, kept the chains left
	// as they were.
	chunks, kept          int
	keptElements          int
	rules, added, deleted int
}

// begin stages the table, its shared sets and maps and its regular
// table-wide chains (over a live table: after flushing what it holds).
func (c *chunker) begin() {
	c.next()
	if c.plan.recreate {
		c.tx.DeleteTable()
	}
	c.tx.AddTable()
	if c.plan.live {
		tableWide := map[string]bool{}
		for _, ch := range baseChains(c.r.fc, c.r.local) {
			tableWide[ch.Name] = true
		}
		for _, ch := range c.plan.existing.Chains {
			if c.plan.kept == nil || tableWide[ch] {
				c.tx.FlushChain(ch)
			}
		}
		for _, s := range c.plan.existing.Sets {
			// clients keep their endpoint across a rewrite
			if !isAffinitySet(s) && c.plan.elements[s] == nil {
				c.tx.FlushSet(s)
			}
		}
	}
	sets := baseSets(c.r.fc)
	for i := range c.r.ids.mapCount() {
		sets = append(sets, endpointMapSet(endpointMap(i)))
	}
	c.add(baseChainsWhere(c.r.fc, c.r.local, false), sets, nil)
}

// end stages the chains the hooks enter by and, over a live table, the
// deletion of the chains and sets no longer wanted.
func (c *chunker) end() {
	c.add(baseChainsWhere(c.r.fc, c.r.local, true), nil, nil)
	if !c.plan.live {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(c.plan.elements)) {
		ls := c.plan.elements[name]
		if els := ls.leftover(c.r.fc.nft); len(els) > 0 && c.wantedSet(name) {
			c.tx.DeleteElements(ls.set, els) // before the chains they jump to go
		}
	}
	var unwanted []string
	for _, ch := range c.plan.existing.Chains {
		if !c.wantedChain(ch) {
			unwanted = append(unwanted, ch)
			c.tx.FlushChain(ch) // all before any is deleted: they may jump to each other
		}
	}
	for _, ch := range unwanted {
		c.tx.DeleteChain(ch)
	}
	for _, s := range c.plan.existing.Sets {
		if !c.wantedSet(s) {
			c.tx.DeleteSet(s)
		}
	}
}

// keep drops from a port's chains those the live table holds as
// rendered (its tag's print, plan.kept, is the render's), counting their
// rules as written; a chain the table holds otherwise (or a port's
// without tags: session affinity) is flushed, in the staged chunk,
// before it is written again.
func (c *chunker) keep(o *portObjects) []*ruleset.Chain {
	if c.plan.kept == nil {
		return o.chains
	}
	if c.existing == nil {
		c.existing = make(map[string]bool, len(c.plan.existing.Chains))
		for _, name := range c.plan.existing.Chains {
			c.existing[name] = true
		}
	}
	out := o.chains[:0:0]
	for _, ch := range o.chains {
		live, rendered := c.plan.kept.get(ch.Name), o.tags[ch.Name]
		switch {
		case !c.existing[ch.Name]: // new
		case live == nil || live == untagged || rendered == nil:
			c.tx.FlushChain(ch.Name)
		case live.Print == rendered.Print:
			c.w.rules.set(ch.Name, len(ch.Rules))
			c.kept++
			continue
		default:
			c.tx.FlushChain(ch.Name)
		}
		out = append(out, ch)
	}
	return out
}

// wantedChain and wantedSet tell whether this sync writes the named
// chain or set (in a chunk written or the one staged).
func (c *chunker) wantedChain(name string) bool {
	_, ok := c.w.rules.get(name)
	return ok || slices.ContainsFunc(c.d.chains, func(ch *ruleset.Chain) bool { return ch.Name == name })
}

func (c *chunker) wantedSet(name string) bool {
	_, ok := c.w.sets[name]
	return ok || slices.ContainsFunc(c.d.sets, func(s *ruleset.Set) bool { return s.Name == name })
}

// baseChainsWhere gives the table-wide chains a hook enters by (hooked)
// or the others.
func baseChainsWhere(fc *familyConfig, local proxier.LocalMatch, hooked bool) []*ruleset.Chain {
	var out []*ruleset.Chain
	for _, ch := range baseChains(fc, local) {
		if hookedChain(ch) == hooked {
			out = append(out, ch)
		}
	}
	return out
}

func (c *chunker) next() {
	c.tx = ruleset.NewTransaction(c.r.fc.nft, c.plan.table)
	c.d = &desiredTable{elements: map[string][]ruleset.Element{}, deletes: map[string][]ruleset.Element{}, hairpin: c.w.hairpin}
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
		els = c.d.fresh(set, els)
		if ls := c.plan.elements[set]; ls != nil {
			d := ls.diff(els)
			els = d.add
			c.d.deletes[set] = append(c.d.deletes[set], d.del...)
			c.w.counts[set] += d.kept
			c.keptElements += d.kept
		}
		c.d.elements[set] = append(c.d.elements[set], els...)
		c.size += len(els)
	}
}

// commit writes the staged chunk and starts the next: in a transaction
// of its own, or over a live table staged for the last one's.
func (c *chunker) commit(ctx context.Context, last bool) error {
	c.w.add(c.d)
	c.d.writeChunk(c.tx, c.w.sets)
	tx := c.tx
	c.d = nil
	tx.SetDisposable()
	synctrace.Mark(ctx, "render")
	var err error
	if c.plan.live && !last {
		err = c.conn.Append(ctx, tx)
	} else {
		err = c.conn.Run(ctx, tx)
	}
	synctrace.Mark(ctx, "commit")
	if err != nil {
		if c.plan.live {
			c.conn.Discard()
		}
		return fmt.Errorf("chunk %d of a full sync: %w", c.chunks+1, err)
	}
	rules, added, deleted := tx.Counts()
	c.chunks++
	c.rules, c.added, c.deleted = c.rules+rules, c.added+added, c.deleted+deleted
	c.next()
	return nil
}

func (c *chunker) result() syncResult {
	return syncResult{full: true, rules: c.rules, added: c.added, deleted: c.deleted}
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
	for _, name := range slices.Sorted(maps.Keys(d.deletes)) {
		if els := d.deletes[name]; len(els) > 0 {
			tx.DeleteElements(sets[name], els)
		}
	}
	names := slices.Sorted(maps.Keys(d.elements))
	for _, name := range names {
		if els := d.elements[name]; len(els) > 0 {
			tx.AddElements(sets[name], els)
		}
	}
}
