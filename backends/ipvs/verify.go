package ipvs

import (
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/reconcile"
)

// Partial syncs write only what their Diff names, and IPVS keeps
// forwarding without its companions, so a firewall reload (`iptables -F;
// iptables -X`), an `ipset flush`, `ip link del kube-ipvs0` or an
// `ipvsadm -d` goes unnoticed: loadBalancerSourceRanges stops being
// enforced, hairpin and masquerade break, until the hourly full sync.
// Upstream kube-proxy's ipvs mode watches a canary chain for the iptables
// part. Here the periodic sync (Diff.Verify, every two thirds of
// --ipvs-sync-period), and any partial sync once the last check is older
// than Config.VerifyInterval (changes that keep arriving postpone the
// periodic one: reconcile.Cadence), checks every piece of kernel state
// this mode owns before it renders (Backend.verify, sync.go), and the
// same sync repairs only what differs. Each applier reads back its own
// kernel API:
//
//   - iptables, per family (iptablesApplier.verify): nothing is read while
//     the fingerprint (nf_tables generation, legacy entry counts) shows no
//     other writer; otherwise every chain's rule count and the jumps from
//     the built-in chains are compared with what was written, and a
//     family that differs gets its restore and missing jumps again.
//   - ipsets (setApplier.verify): every set's member count (`ipset list
//     -terse`) against the model's; only when one moved, `ipset save` and
//     the diff a full sync makes, whose lines go into this sync's restore.
//   - kube-ipvs0 (addressApplier.verify): its addresses are listed (the
//     listing is the cost; comparing is a map lookup each); a missing link
//     or address makes this sync reconcile the interface as a full sync
//     does.
//   - IPVS (ipvsApplier.verify): one read of the whole table (ReadTable)
//     compared in memory; the virtual servers found different are
//     reconciled one by one over netlink, as a partial sync does.
//
// Each difference is logged and counted in
// switchyard_rules_repaired_total{mode="ipvs",kind,ip_family} (and the
// deprecated switchyard_ipvs_state_repaired_total{kind,family}).

// Values of the kind label of switchyard_rules_repaired_total (and of the
// deprecated switchyard_ipvs_state_repaired_total).
const (
	kindIPTables      = reconcile.KindIPTables
	kindIPSet         = reconcile.KindIPSet
	kindInterface     = reconcile.KindInterface
	kindVirtualServer = reconcile.KindVirtualServer
	kindRealServer    = reconcile.KindRealServer
)

// damage is what a verification found changed outside switchyard, by
// piece of kernel state; the same sync repairs it.
type damage struct {
	found    map[repairKind][]string
	checked  map[v1.IPFamily]bool // iptables compared (or untouched) this sync
	iptables map[v1.IPFamily]bool
	setLines []string // restore lines that put the sets back
	addrs    bool
	servers  map[vsKey]struct{}
}

// repairKind is one label pair of the repair metric.
type repairKind struct {
	kind   string
	family v1.IPFamily
}

func newDamage() *damage {
	return &damage{found: map[repairKind][]string{}, checked: map[v1.IPFamily]bool{},
		iptables: map[v1.IPFamily]bool{}, servers: map[vsKey]struct{}{}}
}

// note records differences of one kind.
func (d *damage) note(kind string, f v1.IPFamily, found ...string) {
	if len(found) == 0 {
		return
	}
	k := repairKind{kind, f}
	d.found[k] = append(d.found[k], found...)
}

// The accessors below are safe on a nil damage (no verification ran).

func (d *damage) any() bool { return d != nil && len(d.found) > 0 }

func (d *damage) rewriteIPTables() map[v1.IPFamily]bool {
	if d == nil {
		return nil
	}
	return d.iptables
}

func (d *damage) repairSetLines() []string {
	if d == nil {
		return nil
	}
	return d.setLines
}

func (d *damage) repairAddresses() bool { return d != nil && d.addrs }

// widen adds the virtual servers to repair to the sync's touched ones.
func (d *damage) widen(t *touched) {
	if d == nil {
		return
	}
	for k := range d.servers {
		t.servers[k] = struct{}{}
	}
}

// log reports each kind found, with a few of its differences.
func (d *damage) log() {
	for _, k := range d.sortedKinds() {
		klog.InfoS("IPVS mode kernel state changed outside switchyard; repairing it in this sync",
			"kind", k.kind, "family", familyLabel(k.family), "differences", len(d.found[k]), "found", firstN(d.found[k], 5))
	}
}

// sortedKinds orders the kinds found for stable log output.
func (d *damage) sortedKinds() []repairKind {
	keys := slices.Collect(maps.Keys(d.found))
	slices.SortFunc(keys, func(a, b repairKind) int {
		return cmpString(a.kind+"/"+string(a.family), b.kind+"/"+string(b.family))
	})
	return keys
}

// firstN bounds a log value: a wiped IPVS table lists every service.
func firstN(xs []string, n int) []string {
	if len(xs) <= n {
		return xs
	}
	return append(slices.Clone(xs[:n]), fmt.Sprintf("... and %d more", len(xs)-n))
}

func familyLabel(f v1.IPFamily) string {
	if f == v1.IPv6Protocol {
		return "ipv6"
	}
	return "ipv4"
}
