package iptablestest

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// Packet is the first packet of a NEW connection to trace.
type Packet struct {
	SrcIP, DstIP     netip.Addr
	Protocol         string // "tcp" (default), "udp" or "sctp"
	SrcPort, DstPort uint16
	// Local means the packet originates on the node (nat OUTPUT path);
	// otherwise it arrives from a pod or from outside (nat PREROUTING).
	Local bool
	// NodeIPs are the node's addresses: "-m addrtype --src-type/--dst-type
	// LOCAL" matches them and loopback addresses.
	NodeIPs []netip.Addr
	// InInterface and OutInterface feed -i / -o; rules that use them fail
	// the trace while these are empty, except -i for a Local packet: the
	// node's own packets have no input interface ("-i X" never matches
	// them, "! -i X" always does).
	InInterface, OutInterface string
	// RedirectAddr is the address REDIRECT sends an arriving packet to
	// (the kernel takes the primary address of its input interface);
	// unset: the first of NodeIPs of the family. The node's own packets
	// are REDIRECTed to loopback.
	RedirectAddr netip.Addr
	// Mark is the packet's fwmark when it enters.
	Mark uint32
	// RecentMayMatch makes "-m recent --rcheck/--update" a branch that may
	// or may not match (a client with session affinity state); by default
	// it never matches (a client seen for the first time).
	RecentMayMatch bool
	// Sets holds the ipsets "-m set" matches look up; nil: a rule with a
	// set match fails the trace.
	Sets IPSets
}

// Path is one possible fate of the packet: probabilistic rules branch.
type Path struct {
	Verdict string // "ACCEPT", "DROP" or "REJECT"
	DNAT    string // "ip:port" it was DNATed (or REDIRECTed) to; "" if not
	// Redirect: DNAT is a local address and port a REDIRECT chose.
	Redirect   bool
	Masquerade bool // SNATed / masqueraded in nat POSTROUTING
	Mark       uint32
	Rules      []string // every rule that matched, "table: -A CHAIN ...", in order
	// Probability is the chance that a new connection takes this path
	// (the random draws of -m statistic rules it won or lost); the paths'
	// probabilities add up to 1. A recent match that may hit
	// (RecentMayMatch) is no random draw and leaves it unchanged.
	Probability float64
}

// TraceResult sums up every path.
type TraceResult struct {
	// Endpoints are the DNAT destinations of accepted paths, sorted, unique.
	Endpoints []string
	// Rejected and Dropped say that some path was rejected or dropped.
	Rejected, Dropped bool
	// Masquerade says that some accepted path was masqueraded.
	Masquerade bool
	Paths      []Path
}

// maxTracePaths bounds the branching of probabilistic rules.
const maxTracePaths = 10000

// maxTraceDepth bounds nested jumps (iptables itself refuses loops).
const maxTraceDepth = 64

// Trace walks the rules a NEW connection traverses, the way the kernel
// does: from outside, nat PREROUTING, then filter INPUT and nat INPUT if
// the (DNATed) destination is local, else filter FORWARD and nat
// POSTROUTING; from the node itself (Local), nat OUTPUT, filter OUTPUT,
// nat POSTROUTING (and filter INPUT for a local destination). The mangle
// and raw tables are not traversed. Rules that need a match or target the
// tracer does not model make it fail.
func (f *Fake) Trace(fam runner.Family, pkt Packet) (TraceResult, error) {
	t, start, err := f.newTracer(fam, pkt)
	if err != nil {
		return TraceResult{}, err
	}
	var flows []flow
	if pkt.Local {
		flows = t.hooks([]flow{start}, "nat/OUTPUT", "filter/OUTPUT", "nat/POSTROUTING")
		in, remote := t.splitLocal(flows)
		flows = append(remote, t.hooks(in, "filter/INPUT")...)
	} else {
		flows = t.hooks([]flow{start}, "nat/PREROUTING")
		in, fwd := t.splitLocal(flows)
		flows = append(t.hooks(in, "filter/INPUT", "nat/INPUT"), t.hooks(fwd, "filter/FORWARD", "nat/POSTROUTING")...)
	}
	if t.err != nil {
		return TraceResult{}, t.err
	}
	for i := range flows {
		flows[i].verdict = "ACCEPT"
	}
	return summarize(append(t.done, flows...)), nil
}

// TraceHooks walks only the named built-in chains ("nat/PREROUTING",
// "filter/INPUT", ...), in order, with no routing decision between them,
// for a caller that models a hook the tracer does not (IPVS in LOCAL_IN
// rewrites the destination between filter INPUT and nat POSTROUTING) and
// traces the stages around it itself. Paths that get through every
// chain are ACCEPT.
func (f *Fake) TraceHooks(fam runner.Family, pkt Packet, hooks ...string) (TraceResult, error) {
	t, start, err := f.newTracer(fam, pkt)
	if err != nil {
		return TraceResult{}, err
	}
	flows := t.hooks([]flow{start}, hooks...)
	if t.err != nil {
		return TraceResult{}, t.err
	}
	for i := range flows {
		flows[i].verdict = "ACCEPT"
	}
	return summarize(append(t.done, flows...)), nil
}

func (f *Fake) newTracer(fam runner.Family, pkt Packet) (*tracer, flow, error) {
	if err := checkPacket(fam, &pkt); err != nil {
		return nil, flow{}, err
	}
	f.mu.Lock()
	tables := map[string]*table{"nat": f.tables[fam]["nat"], "filter": f.tables[fam]["filter"]}
	f.mu.Unlock()
	return &tracer{tables: tables, pkt: pkt}, flow{dst: pkt.DstIP, dport: pkt.DstPort, mark: pkt.Mark, prob: 1}, nil
}

func checkPacket(fam runner.Family, pkt *Packet) error {
	pkt.Protocol = strings.ToLower(pkt.Protocol)
	if pkt.Protocol == "" {
		pkt.Protocol = "tcp"
	}
	for _, a := range []netip.Addr{pkt.SrcIP, pkt.DstIP} {
		if !a.IsValid() || a.Is4() != (fam == runner.IPv4) {
			return fmt.Errorf("iptablestest: trace: address %v is not %s", a, fam)
		}
	}
	return nil
}

func summarize(flows []flow) TraceResult {
	var res TraceResult
	seen := map[string]bool{}
	for _, fl := range flows {
		res.Paths = append(res.Paths, Path{Verdict: fl.verdict, DNAT: fl.dnat, Redirect: fl.redirect, Masquerade: fl.masq, Mark: fl.mark, Rules: fl.rules, Probability: fl.prob})
		switch fl.verdict {
		case "DROP":
			res.Dropped = true
		case "REJECT":
			res.Rejected = true
		case "ACCEPT":
			res.Masquerade = res.Masquerade || fl.masq
			if fl.dnat != "" && !seen[fl.dnat] {
				seen[fl.dnat] = true
				res.Endpoints = append(res.Endpoints, fl.dnat)
			}
		}
	}
	sort.Strings(res.Endpoints)
	return res
}
