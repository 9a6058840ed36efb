package iptables

import (
	"fmt"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// A full sync renders every service port twice, and holds the rules of
// at most one port at a time:
//
//   - to plan it (renderSealed): each port is rendered, then its chains
//     are sealed, their rules replaced by a fingerprint and a count (all
//     that planning the transactions, recording what was installed and
//     later partial syncs need), before the next port is rendered;
//   - to write it: the transaction's payload pieces (payload.go) render
//     each port again as they are asked for, while apply writes them
//     into iptables-restore's stdin (rerenderer).
//
// At 10k services x 10 endpoints the rules of every port are ~60 MB of
// strings; held whole through the restore (20-30 s on iptables-nft) they
// were, with the payload, most of the first sync's peak. The second
// render costs ~0.1 s of CPU per port rendered again while the restore
// runs. It is checked: a chain rendered again must match its
// fingerprint, or the payload fails, iptables-restore is killed before
// that table's COMMIT and the sync fails (the next one is full).

// sealedRules stands for the rules of a sealed chain: their fingerprint
// and count, and the port whose render gives them back.
type sealedRules struct {
	sum   uint64
	count int
	port  *proxier.ServicePort
}

// rerenderer gives back the rules of sealed chains, from the State the
// sync rendered (the proxier does not change it during a sync). Chains
// arrive grouped by port within a tier, so it keeps the last port's
// render only.
type rerenderer struct {
	r     *serviceRenderer
	state *proxier.State
	last  *proxier.ServicePort
	spr   *servicePortRules
}

func newRerenderer(fc *familyConfig, state *proxier.State) *rerenderer {
	return &rerenderer{r: newServiceRenderer(fc, nodeOf(state)), state: state}
}

// rules renders c's port again and returns c's rules, or an error when
// they are not those c was sealed with.
func (x *rerenderer) rules(c *chainRules) ([]string, error) {
	s := c.sealed
	if x == nil {
		return nil, fmt.Errorf("iptables backend: chain %s/%s: its rules were dropped", c.key.table, c.key.name)
	}
	if x.last != s.port {
		x.last, x.spr = s.port, x.r.render(s.port, x.state.Endpoints[s.port.Name])
	}
	if x.spr != nil {
		for _, rc := range x.spr.chains {
			if rc.key == c.key && len(rc.rules) == s.count && hashRules(rc.rules) == s.sum {
				return rc.rules, nil
			}
		}
	}
	return nil, fmt.Errorf("iptables backend: chain %s/%s of %s renders differently than when the sync was planned", c.key.table, c.key.name, s.port.Name)
}
