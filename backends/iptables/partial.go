package iptables

import "slices"

// partialChanges lists what a partial sync writes and deletes: the chains
// of re-rendered service ports whose rules differ from what was last
// written, the top-level chains if they were rebuilt and differ, and the
// chains of re-rendered or removed service ports that went away. A
// one-endpoint change thus sends that service's KUBE-SVC chain and one
// KUBE-SEP chain, not the table; a new service adds its chains and its
// rules in the top-level chains, which are edited rather than rewritten.
func (f *familySync) partialChanges(rs *Ruleset) (writes []*chainRules, deletes []chainKey) {
	for _, n := range rs.changed {
		cur, old := rs.services[n], f.prev.services[n]
		if cur != nil {
			for _, c := range cur.chains {
				if f.differs(c) {
					writes = append(writes, c)
				}
			}
		}
		if old == nil {
			continue
		}
		for _, k := range old.chainKeys() {
			if cur == nil || !slices.ContainsFunc(cur.chains, func(x *chainRules) bool { return x.key == k }) {
				deletes = append(deletes, k)
			}
		}
	}
	if rs.dispatchRebuilt {
		for _, c := range rs.dispatch {
			if f.differs(c) {
				writes = append(writes, f.editedChain(c, f.prev.topLevel(c.key)))
			}
		}
	}
	return writes, deletes
}

// differs reports whether a chain must be written: it is not known to be
// installed with exactly these rules.
func (f *familySync) differs(c *chainRules) bool {
	in, ok := f.installed[c.key]
	return !ok || !in.known || in.rules != c.ruleCount() || in.hash != c.hash()
}

// compact keeps only the names of per-service chains once applied: a
// later partial sync needs only those (to delete the chains that go away)
// and the fingerprints kept in installed. At 10k services x 10 endpoints
// their rule text is most of the memory a ruleset takes, and their
// chainRules (~130k) ~12 MiB more than the names. Top-level and base
// chains keep their rules. A compacted ruleset can be diffed against, not
// applied or printed.
func compact(rs *Ruleset) *Ruleset {
	for _, n := range rs.changed {
		if s := rs.services[n]; s != nil && s.chains != nil {
			s.keys, s.chains = s.chainKeys(), nil
		}
	}
	return rs
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
