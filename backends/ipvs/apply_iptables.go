package ipvs

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

func runnerFamily(f v1.IPFamily) runner.Family {
	if f == v1.IPv6Protocol {
		return runner.IPv6
	}
	return runner.IPv4
}

// portRules collects the per-port rules of a family, ordered by port
// name so the payload is stable.
func (b *Backend) portRules(f v1.IPFamily) (filter, nat []string) {
	keys := make([]portKey, 0, len(b.model.ports))
	for k, r := range b.model.ports {
		if k.Family == f && (len(r.filter) > 0 || len(r.nat) > 0) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, c portKey) int { return cmpString(a.String(), c.String()) })
	for _, k := range keys {
		r := b.model.ports[k]
		filter = append(filter, r.filter...)
		nat = append(nat, r.nat...)
	}
	return filter, nat
}

// syncIPTables restores our chains of each family when they changed, on
// a full sync, or when a verification found them changed (repair); a
// full sync or a repair also inserts, in the same transaction, the jumps
// from the built-in chains that iptables-save does not show.
func (b *Backend) syncIPTables(ctx context.Context, full bool, repair map[v1.IPFamily]bool) (bool, error) {
	wrote := false
	for _, f := range b.cfg.families() {
		filter, nat := b.portRules(f)
		data := payload(b.static[f], filter, nat)
		rewrite := full || repair[f]
		if !rewrite && bytes.Equal(data, b.lastPayload[f]) {
			continue
		}
		send := data
		if rewrite {
			missing, err := b.missingJumps(ctx, f)
			if err != nil {
				return wrote, err
			}
			send = withJumps(data, missing)
		}
		if err := b.k.IPTables.Restore(ctx, runnerFamily(f), send); err != nil {
			klog.ErrorS(err, "iptables-restore failed", "family", f, "lines", runner.OffendingLines(send, err))
			delete(b.lastPayload, f)
			return wrote, fmt.Errorf("iptables %s: %w", f, err)
		}
		b.lastPayload[f] = data
		wrote = true
	}
	return wrote, nil
}

// missingJumps lists the jumps no rule of the built-in chain makes yet.
func (b *Backend) missingJumps(ctx context.Context, f v1.IPFamily) ([]jump, error) {
	present := map[string]bool{}
	for _, table := range []string{"nat", "filter"} {
		data, err := b.k.IPTables.SaveTable(ctx, runnerFamily(f), table)
		if err != nil {
			return nil, fmt.Errorf("iptables %s: %w", f, err)
		}
		for _, r := range runner.ParseSave(data).Rules {
			present[table+"/"+r.Chain+"/"+r.Target] = true
		}
	}
	var missing []jump
	for _, j := range jumps() {
		if !present[j.table+"/"+j.from+"/"+j.to()] {
			missing = append(missing, j)
		}
	}
	return missing, nil
}

// withJumps adds "-I CHAIN 1 ..." lines at the end of each table's
// section, last jump first so they end up in order.
func withJumps(data []byte, missing []jump) []byte {
	if len(missing) == 0 {
		return data
	}
	out := string(data)
	for _, table := range []string{"filter", "nat"} {
		var lines []string
		for i := len(missing) - 1; i >= 0; i-- {
			if j := missing[i]; j.table == table {
				lines = append(lines, j.insertLine())
			}
		}
		if len(lines) == 0 {
			continue
		}
		start := strings.Index(out, "*"+table+"\n")
		end := start + strings.Index(out[start:], "COMMIT\n")
		out = out[:end] + strings.Join(lines, "\n") + "\n" + out[end:]
	}
	return []byte(out)
}
