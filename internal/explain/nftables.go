package explain

import (
	"context"
	"fmt"
	"net/netip"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// TableReader reads an nf_tables table back from the kernel
// (nftables.NetlinkConn.ReadTable).
type TableReader interface {
	ReadTable(ctx context.Context, fam ruleset.Family, table string) (*ruleset.Table, bool, error)
}

// nftablesPlane is the live switchyard table of each family, traced by
// ruleset.Table.Trace.
type nftablesPlane struct {
	tables map[ruleset.Family]*ruleset.Table
	local  []netip.Addr
}

// ReadNFTables reads the named table of each family.
func ReadNFTables(ctx context.Context, r TableReader, table string, fams []v1.IPFamily, local []netip.Addr) (Dataplane, error) {
	p := &nftablesPlane{tables: map[ruleset.Family]*ruleset.Table{}, local: local}
	for _, fam := range fams {
		nf := nftables.FamilyOf(fam)
		t, ok, err := r.ReadTable(ctx, nf, table)
		if err != nil {
			return nil, fmt.Errorf("reading table %s %s: %w", nf, table, err)
		}
		if ok {
			p.tables[nf] = t
		}
	}
	return p, nil
}

func (p *nftablesPlane) Mode() string             { return "nftables" }
func (p *nftablesPlane) LocalAddrs() []netip.Addr { return p.local }

// Trace implements Dataplane. A family without the table leaves every
// packet untouched.
func (p *nftablesPlane) Trace(pr Probe) ([]Path, error) {
	fam := ruleset.IPv4
	if pr.Dst.Is6() {
		fam = ruleset.IPv6
	}
	t := p.tables[fam]
	if t == nil {
		return []Path{{Verdict: "accept", Probability: 1}}, nil
	}
	proto, ok := nftables.ProtocolNumber(pr.Protocol)
	if !ok {
		return nil, fmt.Errorf("protocol %q", pr.Protocol)
	}
	pkt := ruleset.Packet{Saddr: pr.Src, Daddr: pr.Dst, L4Proto: proto, Dport: pr.Port}
	if !pr.FromNode {
		pkt.Iifname = pr.InInterface
	}
	res, err := t.Trace(pkt, p.local, pr.FromNode)
	if err != nil {
		return nil, err
	}
	out := make([]Path, 0, len(res.Paths))
	for _, rp := range res.Paths {
		out = append(out, Path{Verdict: rp.Verdict, Endpoint: rp.DNAT, Masquerade: rp.Masquerade, Probability: rp.Probability, Rules: rp.Rules})
	}
	return out, nil
}
