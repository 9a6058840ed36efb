package explain

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// iptablesPlane is the live iptables ruleset of the filter and nat
// tables, loaded into the iptables fake, whose tracer follows packets.
type iptablesPlane struct {
	mode  string
	rules *iptablestest.Fake
	local []netip.Addr
}

// TableExists says whether a table is in the kernel already (saving a
// missing legacy table would create it).
type TableExists func(fam runner.Family, table string) bool

// ReadIPTables saves the filter and nat tables of each family with the
// runner (iptables-save: read only) and loads them for the tracer. A
// family without iptables tools is left out (nothing programs it). mode
// is the proxy mode, for the report (iptables, or userspace whose rules
// are iptables rules too).
func ReadIPTables(ctx context.Context, mode string, r runner.Interface, fams []v1.IPFamily, exists TableExists, local []netip.Addr) (Dataplane, error) {
	rules, err := loadIPTables(ctx, r, fams, exists)
	if err != nil {
		return nil, err
	}
	return &iptablesPlane{mode: mode, rules: rules, local: local}, nil
}

// loadIPTables saves the filter and nat tables of each family into the
// iptables fake, whose tracer walks them.
func loadIPTables(ctx context.Context, r runner.Interface, fams []v1.IPFamily, exists TableExists) (*iptablestest.Fake, error) {
	rules := iptablestest.NewFake()
	for _, fam := range fams {
		rf := runnerFamily(fam)
		for _, table := range []string{"filter", "nat"} {
			if exists != nil && !exists(rf, table) {
				continue
			}
			data, err := r.SaveTable(ctx, rf, table)
			if errors.Is(err, runner.ErrFamilyUnavailable) {
				break // no ip6tables on this node: the family is not programmed
			}
			if err != nil {
				return nil, fmt.Errorf("saving %s %s table: %w", fam, table, err)
			}
			if err := rules.Restore(ctx, rf, data); err != nil {
				return nil, fmt.Errorf("the tracer cannot load the live %s %s table: %w", fam, table, err)
			}
		}
	}
	return rules, nil
}

func runnerFamily(fam v1.IPFamily) runner.Family {
	if fam == v1.IPv6Protocol {
		return runner.IPv6
	}
	return runner.IPv4
}

// LegacyTableExists reads the kernel's list of loaded legacy tables of
// the calling thread's network namespace.
func LegacyTableExists(fam runner.Family, table string) bool {
	file := "/proc/thread-self/net/ip_tables_names"
	if fam == runner.IPv6 {
		file = "/proc/thread-self/net/ip6_tables_names"
	}
	b, err := os.ReadFile(file)
	return err == nil && strings.Contains("\n"+string(b), "\n"+table+"\n")
}

func (p *iptablesPlane) Mode() string             { return p.mode }
func (p *iptablesPlane) LocalAddrs() []netip.Addr { return p.local }

// Trace implements Dataplane.
func (p *iptablesPlane) Trace(pr Probe) ([]Path, error) {
	fam := runner.IPv4
	if pr.Dst.Is6() {
		fam = runner.IPv6
	}
	res, err := p.rules.Trace(fam, iptablestest.Packet{
		SrcIP: pr.Src, DstIP: pr.Dst, DstPort: pr.Port, SrcPort: 40000,
		Protocol: strings.ToLower(string(pr.Protocol)), Local: pr.FromNode,
		NodeIPs: p.local, InInterface: pr.InInterface, RecentMayMatch: pr.Returning, Mark: pr.Mark,
	})
	if err != nil {
		return nil, err
	}
	out := make([]Path, 0, len(res.Paths))
	for _, rp := range res.Paths {
		path := Path{Verdict: strings.ToLower(rp.Verdict), Masquerade: rp.Masquerade, Redirected: rp.Redirect, Probability: rp.Probability, Rules: rp.Rules}
		if rp.DNAT != "" {
			path.Endpoint, err = netip.ParseAddrPort(rp.DNAT)
			if err != nil {
				return nil, fmt.Errorf("DNAT to %q: %w", rp.DNAT, err)
			}
		}
		out = append(out, path)
	}
	return out, nil
}
