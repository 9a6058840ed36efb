package nftables_test

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// Upstream kube-proxy's nftables mode (v1.37.1, pkg/proxy/nftables): the
// base chains it deletes and recreates on its first sync, and the sets and
// maps it adds (an add of an existing set of another type fails its whole
// transaction).
var (
	upstreamBaseChains = map[string]ruleset.Hook{
		"filter-prerouting-pre-dnat": {Type: "filter", Hook: "prerouting", Priority: -110},
		"filter-output-pre-dnat":     {Type: "filter", Hook: "output", Priority: -110},
		"filter-input":               {Type: "filter", Hook: "input", Priority: 0},
		"filter-forward":             {Type: "filter", Hook: "forward", Priority: 0},
		"filter-output":              {Type: "filter", Hook: "output", Priority: 0},
		"nat-prerouting":             {Type: "nat", Hook: "prerouting", Priority: -100},
		"nat-output":                 {Type: "nat", Hook: "output", Priority: -100},
		"nat-postrouting":            {Type: "nat", Hook: "postrouting", Priority: 100},
	}
	upstreamSets = map[ruleset.Family]map[string]string{
		ruleset.IPv4: {
			"service-ips":                     "type ipv4_addr . inet_proto . inet_service : verdict",
			"service-nodeports":               "type inet_proto . inet_service : verdict",
			"firewall-ips":                    "type ipv4_addr . inet_proto . inet_service : verdict",
			"no-endpoint-services":            "type ipv4_addr . inet_proto . inet_service : verdict",
			"no-endpoint-nodeports":           "type inet_proto . inet_service : verdict",
			"cluster-ips":                     "type ipv4_addr",
			"nodeport-ips":                    "type ipv4_addr",
			"hairpin-connections":             "type ipv4_addr . ipv4_addr . inet_proto . inet_service",
			"localhost-nodeport-reject-ports": "type inet_proto . inet_service : verdict",
		},
		ruleset.IPv6: {
			"service-ips":                     "type ipv6_addr . inet_proto . inet_service : verdict",
			"service-nodeports":               "type inet_proto . inet_service : verdict",
			"firewall-ips":                    "type ipv6_addr . inet_proto . inet_service : verdict",
			"no-endpoint-services":            "type ipv6_addr . inet_proto . inet_service : verdict",
			"no-endpoint-nodeports":           "type inet_proto . inet_service : verdict",
			"cluster-ips":                     "type ipv6_addr",
			"nodeport-ips":                    "type ipv6_addr",
			"hairpin-connections":             "type ipv6_addr . ipv6_addr . inet_proto . inet_service",
			"localhost-nodeport-reject-ports": "type inet_proto . inet_service : verdict",
		},
	}
	// Regular chains kube-proxy adds and flushes by name; the same name here
	// is harmless.
	upstreamChains = map[string]bool{
		"services": true, "masquerading": true, "firewall-check": true, "service-endpoints-check": true,
		"nodeport-endpoints-check": true, "cluster-ips-check": true, "reject-chain": true,
	}
)

// TestTableIsAdoptableByKubeProxy checks, over every service shape of the
// flow fixture, the rules that let kube-proxy's nftables mode start over
// switchyard's table (a rollback): base chains only of upstream's names and
// hooks, sets of upstream's names only with upstream's types and no
// flags, no chain name with a "/" (kube-proxy would take it for a stale
// service chain and try to delete it while switchyard's maps refer to it),
// no set named "affinity-*" (kube-proxy deletes those in its sync
// transaction), and every other object recognisably switchyard's.
func TestTableIsAdoptableByKubeProxy(t *testing.T) {
	state, node := flowtest.Fixture()
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
		tbl := fake.Table(fam, nftables.TableName)
		for name, c := range tbl.Chains {
			checkAdoptableChain(t, name, c)
		}
		for name, s := range tbl.Sets {
			checkAdoptableSet(t, fam, name, s.Set)
		}
	}
}

func checkAdoptableChain(t *testing.T, name string, c *ruleset.Chain) {
	t.Helper()
	if c.Hook != nil {
		if want, ok := upstreamBaseChains[name]; !ok || *c.Hook != want {
			t.Errorf("base chain %s (%v): kube-proxy would not replace it (its base chains: %v)", name, *c.Hook, upstreamBaseChains)
		}
		return
	}
	if strings.Contains(name, "/") {
		t.Errorf("chain %s holds a /: kube-proxy would take it for its own stale service chain", name)
	}
	if !upstreamChains[name] && !nftables.SwitchyardObject(name) {
		t.Errorf("chain %s is neither kube-proxy's nor recognised by SwitchyardObject", name)
	}
}

func checkAdoptableSet(t *testing.T, fam ruleset.Family, name string, s *ruleset.Set) {
	t.Helper()
	if strings.HasPrefix(name, "affinity-") {
		t.Errorf("set %s: kube-proxy deletes affinity-* sets it does not know", name)
	}
	if want, ok := upstreamSets[fam][name]; ok {
		if got := s.TypeText(fam); got != want || s.Interval || s.Dynamic {
			t.Errorf("%s set %s: %q (interval %v, dynamic %v), kube-proxy adds it as %q", fam, name, got, s.Interval, s.Dynamic, want)
		}
		return
	}
	if !nftables.SwitchyardObject(name) {
		t.Errorf("set %s is neither kube-proxy's nor recognised by SwitchyardObject", name)
	}
}
