package iptables

import (
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/shrink"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// chainRules is one chain this mode owns and always writes whole: its
// table, name, tier and rule lines ("-A NAME ...").
type chainRules struct {
	key   chainKey
	tier  tier
	rules []string
	// edits, when set, is how a partial sync writes the chain: the
	// inserts and deletions that turn what the kernel holds into rules
	// (edits.go), without declaring (flushing) it.
	edits []string
	// sealed, set on a full sync's service chains, stands for rules,
	// dropped as soon as they were rendered (sealed.go).
	sealed *sealedRules
}

func newChain(t table, name string, rules ...string) *chainRules {
	c := makeChain(t, name, rules)
	return &c
}

// makeChain is newChain for chains allocated together.
func makeChain(t table, name string, rules []string) chainRules {
	return chainRules{key: chainKey{table: t, name: name}, tier: tierOf(t, name), rules: rules}
}

// hash fingerprints the chain's rules, to tell whether it changed since
// it was last written without keeping the text of every chain.
func (c *chainRules) hash() uint64 {
	if c.sealed != nil {
		return c.sealed.sum
	}
	return hashRules(c.rules)
}

// ruleCount is how many rules the chain holds.
func (c *chainRules) ruleCount() int {
	if c.sealed != nil {
		return c.sealed.count
	}
	return len(c.rules)
}

func hashRules(rules []string) uint64 {
	h := fnv.New64a()
	for _, r := range rules {
		h.Write([]byte(r))
		h.Write([]byte{'\n'})
	}
	return h.Sum64()
}

// shared indexes the top-level chains service ports add rules to.
type shared int

const (
	sharedNATServices shared = iota
	sharedNATNodePorts
	sharedFilterServices
	sharedFilterExternal
	sharedFilterNodePorts
	sharedFilterFirewall
	numShared
)

// servicePortRules is everything one service port renders to in one
// family: its own nat chains, in tier order (KUBE-SEP-*, KUBE-SVC/SVL,
// KUBE-EXT, KUBE-FW), and the rules it adds to the top-level chains.
type servicePortRules struct {
	// chains are nil once compacted: keys then names them.
	chains []*chainRules
	keys   []chainKey
	shared [numShared][]string
	// noLocalInternal / noLocalExternal: Local policy with no local
	// endpoints, for the no-local-endpoints metric.
	noLocalInternal, noLocalExternal bool
}

// chainKeys names the port's chains.
func (s *servicePortRules) chainKeys() []chainKey {
	if s.chains == nil {
		return s.keys
	}
	keys := make([]chainKey, len(s.chains))
	for i, c := range s.chains {
		keys[i] = c.key
	}
	return keys
}

// seal fingerprints the port's chains and drops their rules; port is
// what they are rendered again from (sealed.go).
func (s *servicePortRules) seal(port *proxier.ServicePort) {
	seals := make([]sealedRules, len(s.chains))
	for i, c := range s.chains {
		seals[i] = sealedRules{sum: c.hash(), count: len(c.rules), port: port}
		c.sealed, c.rules = &seals[i], nil
	}
}

// Ruleset is the desired state of one IP family: every chain this mode
// owns in the mangle, filter and nat tables with its rules. It is the
// output of the pure render and the input of apply.
type Ruleset struct {
	family v1.IPFamily
	// node holds the node addresses of the family the render used.
	node []netip.Addr
	// local is the local-traffic match the render used (NodeCIDR mode
	// resolves it from the node's pod CIDRs).
	local proxier.LocalMatch
	// names lists the rendered service ports, sorted.
	names    []proxier.ServicePortName
	services map[proxier.ServicePortName]*servicePortRules
	// servicesPeak lets services give back its space after mass
	// deletions (partial syncs carry the map from ruleset to ruleset).
	servicesPeak shrink.Peak
	// base are the fixed chains (canaries, masquerade, forward);
	// dispatch the top-level chains built from the services' shared rules.
	base, dispatch []*chainRules
	// changed lists the service ports (re)rendered by this render, sorted:
	// every one for a full render, the Diff's for a partial one. Ports
	// named here but absent from services were removed.
	changed []proxier.ServicePortName
	// dispatchRebuilt is false when a partial render reused the previous
	// top-level chains unchanged.
	dispatchRebuilt bool
}

// Family is the IP family the ruleset is for.
func (rs *Ruleset) Family() v1.IPFamily { return rs.family }

// chains returns every chain of the ruleset, sorted by tier (stable, so
// within a tier the render order is kept).
func (rs *Ruleset) chains() []*chainRules {
	out := slices.Clone(rs.base)
	for _, n := range rs.names {
		out = append(out, rs.services[n].chains...)
	}
	out = append(out, rs.dispatch...)
	slices.SortStableFunc(out, func(a, b *chainRules) int { return int(a.tier) - int(b.tier) })
	return out
}

// topLevel returns the ruleset's base or dispatch chain k, or nil.
func (rs *Ruleset) topLevel(k chainKey) *chainRules {
	for _, c := range slices.Concat(rs.base, rs.dispatch) {
		if c.key == k {
			return c
		}
	}
	return nil
}

// compact keeps only the names of per-service chains once applied: a
// later partial sync needs only those (to delete the chains that go away)
// and the fingerprints kept in installedChains. At 10k services x 10
// endpoints their rule text is most of the memory a ruleset takes, and
// their chainRules (~130k) ~12 MiB more than the names. Top-level and
// base chains keep their rules. A compacted ruleset can be diffed
// against, not applied or printed.
func (rs *Ruleset) compact() *Ruleset {
	for _, n := range rs.changed {
		if s := rs.services[n]; s != nil && s.chains != nil {
			s.keys, s.chains = s.chainKeys(), nil
		}
	}
	return rs
}

// RuleCount returns the number of rules the ruleset puts in a table.
func (rs *Ruleset) RuleCount(t string) int {
	n := 0
	for _, c := range rs.chains() {
		if string(c.key.table) == t {
			n += c.ruleCount()
		}
	}
	return n
}

// String renders the ruleset as iptables-restore input in canonical form:
// tables in a fixed order, chain declarations sorted, then the rules of
// each chain in sorted chain order. Golden tests compare it.
func (rs *Ruleset) String() string {
	var b strings.Builder
	all := rs.chains()
	slices.SortFunc(all, func(a, b *chainRules) int { return strings.Compare(a.key.name, b.key.name) })
	for _, t := range allTables() {
		b.WriteString("*" + string(t) + "\n")
		for _, c := range all {
			if c.key.table == t {
				b.WriteString(":" + c.key.name + " - [0:0]\n")
			}
		}
		for _, c := range all {
			if c.key.table == t {
				for _, r := range c.rules {
					b.WriteString(r + "\n")
				}
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// noLocalEndpoints counts service ports with a Local policy and no local
// endpoints, per policy, for kubeproxy_sync_proxy_rules_no_local_endpoints_total.
func (rs *Ruleset) noLocalEndpoints() (internal, external int) {
	for _, n := range rs.names {
		s := rs.services[n]
		if s.noLocalInternal {
			internal++
		}
		if s.noLocalExternal {
			external++
		}
	}
	return internal, external
}
