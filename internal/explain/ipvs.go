package explain

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// IPVSConfig is what ReadIPVS reads, all read only.
type IPVSConfig struct {
	// IPVS reads the virtual services; nil when IPVS is not loaded
	// (then no address is load-balanced).
	IPVS IPVSReader
	// IPSets gives `ipset save` (the ipvs backend's ipset runner).
	IPSets SetSaver
	// IPTables saves the companion rules; Exists as for ReadIPTables.
	IPTables runner.Interface
	Exists   TableExists
	Families []v1.IPFamily
	Local    []netip.Addr
}

// ipvsPlane is the ipvs mode: the companion iptables rules (evaluated
// with the live ipsets) around IPVS, which balances in LOCAL_IN.
type ipvsPlane struct {
	rules *iptablestest.Fake
	vss   []virtualServer
	sets  savedSets
	local []netip.Addr
}

// ReadIPVS reads the companion rules, the IPVS table and the ipsets
// once. Sets that cannot be read are no error here: every rule that
// matches one then stops its trace with `cannot trace`.
func ReadIPVS(ctx context.Context, cfg IPVSConfig) (Dataplane, error) {
	rules, err := loadIPTables(ctx, cfg.IPTables, cfg.Families, cfg.Exists)
	if err != nil {
		return nil, err
	}
	vss, err := readVirtualServers(cfg.IPVS)
	if err != nil {
		return nil, err
	}
	return &ipvsPlane{rules: rules, vss: vss, sets: readSets(ctx, cfg.IPSets), local: cfg.Local}, nil
}

func (p *ipvsPlane) Mode() string             { return "ipvs" }
func (p *ipvsPlane) LocalAddrs() []netip.Addr { return p.local }

func (p *ipvsPlane) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(p.local, a)
}

// Trace implements Dataplane. The packet takes the kernel's path in ipvs
// mode: nat PREROUTING (from the node: nat OUTPUT, filter OUTPUT, nat
// POSTROUTING); for a local destination filter INPUT, then IPVS in
// LOCAL_IN, which sends it to a real server through filter OUTPUT and
// (for an arriving packet) nat POSTROUTING; otherwise it is forwarded
// (filter FORWARD, nat POSTROUTING) or leaves the node.
func (p *ipvsPlane) Trace(pr Probe) ([]Path, error) {
	pkt := iptablestest.Packet{SrcIP: pr.Src, DstIP: pr.Dst, DstPort: pr.Port, SrcPort: 40000,
		Protocol: strings.ToLower(string(pr.Protocol)), Local: pr.FromNode, NodeIPs: p.local,
		InInterface: pr.InInterface, RecentMayMatch: pr.Returning, Mark: pr.Mark, Sets: p.sets}
	first := []string{"nat/PREROUTING"}
	if pr.FromNode {
		first = []string{"nat/OUTPUT", "filter/OUTPUT", "nat/POSTROUTING"}
	}
	stages, err := p.stage(pkt, iptablestest.Path{Probability: 1}, first...)
	if err != nil {
		return nil, err
	}
	var out []Path
	for _, s := range stages {
		if s.Verdict != "ACCEPT" {
			out = append(out, pathOf(s, netip.AddrPort{}, ""))
			continue
		}
		more, err := p.routed(pr, pkt, s)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

// stage traces pkt through hooks and appends each resulting path to
// before (rules, probability, masquerade; the mark is the new one).
func (p *ipvsPlane) stage(pkt iptablestest.Packet, before iptablestest.Path, hooks ...string) ([]iptablestest.Path, error) {
	fam := runner.IPv4
	if pkt.DstIP.Is6() {
		fam = runner.IPv6
	}
	res, err := p.rules.TraceHooks(fam, pkt, hooks...)
	if err != nil {
		return nil, err
	}
	out := make([]iptablestest.Path, 0, len(res.Paths))
	for _, r := range res.Paths {
		j := r
		j.Rules = slices.Concat(before.Rules, r.Rules)
		j.Probability = before.Probability * r.Probability
		j.Masquerade = before.Masquerade || r.Masquerade
		if j.DNAT == "" {
			j.DNAT = before.DNAT
		}
		out = append(out, j)
	}
	return out, nil
}

// routed continues a path the first hooks let through: to IPVS when its
// destination is local, else forwarded (or, from the node, sent out).
func (p *ipvsPlane) routed(pr Probe, pkt iptablestest.Packet, s iptablestest.Path) ([]Path, error) {
	next := pkt
	next.Mark = s.Mark
	if s.DNAT != "" {
		ap, err := netip.ParseAddrPort(s.DNAT)
		if err != nil {
			return nil, fmt.Errorf("DNAT to %q: %w", s.DNAT, err)
		}
		next.DstIP, next.DstPort = ap.Addr(), ap.Port()
	}
	var hooks []string
	switch {
	case p.isLocal(next.DstIP):
		hooks = []string{"filter/INPUT"}
	case !pr.FromNode:
		hooks = []string{"filter/FORWARD", "nat/POSTROUTING"}
	}
	after, err := p.stage(next, s, hooks...)
	if err != nil {
		return nil, err
	}
	var out []Path
	for _, a := range after {
		if a.Verdict != "ACCEPT" || !p.isLocal(next.DstIP) {
			out = append(out, pathOf(a, dnatOf(a), ""))
			continue
		}
		more, err := p.balance(pr, next, a)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	}
	return out, nil
}

func dnatOf(a iptablestest.Path) netip.AddrPort {
	ap, _ := netip.ParseAddrPort(a.DNAT)
	return ap
}

// pathOf converts a traced path.
func pathOf(s iptablestest.Path, ep netip.AddrPort, note string) Path {
	return Path{Verdict: strings.ToLower(s.Verdict), Endpoint: ep, Masquerade: s.Masquerade,
		Probability: s.Probability, Rules: s.Rules, Note: note}
}
