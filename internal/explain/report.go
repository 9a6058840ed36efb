package explain

import (
	"net/netip"
	"regexp"
	"slices"
	"strconv"
)

// Report is what the kernel holds for one Service, next to what the API
// says.
type Report struct {
	Service Objects
	Mode    string
	Ports   []PortReport
}

// PortReport is one service port.
type PortReport struct {
	Expected ExpectedPort
	Checks   []CheckResult
}

// Share is one endpoint a new connection may reach and how likely.
type Share struct {
	Endpoint    netip.AddrPort
	Probability float64
	Masquerade  bool
	// Relayed: a userspace proxy socket opens the connection.
	Relayed bool
}

// CheckResult is what the kernel did with one check's probe.
type CheckResult struct {
	Check
	// Reached are the endpoints the kernel sends new connections to.
	Reached []Share
	// Refused is the share of new connections the kernel rejects or
	// drops; Verdicts names how ("reject", "drop").
	Refused  float64
	Verdicts []string
	// Untouched: no rule of the mode rewrote or refused the connection
	// (no rule for this address).
	Untouched bool
	// AffinitySeconds is the session affinity timeout the kernel's
	// rules hold for this address; 0 for none.
	AffinitySeconds int
	// Missing and Extra are the endpoints the API says and the kernel
	// does not reach, and the other way round.
	Missing, Extra []netip.AddrPort
	// Notes say what happened past the rules (Path.Note), once each.
	Notes []string
	// Paths are the traced paths, for --verbose output.
	Paths []Path
	// Err is set when the tracer could not follow the probe.
	Err error
}

// Build traces every check of every port of the Service through dp.
func Build(o Objects, dp Dataplane, inIface func(netip.Addr) string) Report {
	ports, node := Expected(o)
	env := Env{Local: dp.LocalAddrs(), Node: node, InInterface: inIface, NodePortAddresses: o.NodePortAddresses}
	rep := Report{Service: o, Mode: dp.Mode()}
	for _, ep := range ports {
		pr := PortReport{Expected: ep}
		for _, fam := range o.Families {
			for _, c := range Checks(ep, fam, env) {
				pr.Checks = append(pr.Checks, run(dp, c))
			}
		}
		rep.Ports = append(rep.Ports, pr)
	}
	return rep
}

// run traces one check and compares.
func run(dp Dataplane, c Check) CheckResult {
	res := CheckResult{Check: c}
	paths, err := dp.Trace(c.Probe)
	if err != nil {
		res.Err = err
		return res
	}
	res.Paths = paths
	res.summarize(paths)
	res.AffinitySeconds = affinityOf(dp, c.Probe, paths)
	got := make([]netip.AddrPort, 0, len(res.Reached))
	for _, s := range res.Reached {
		got = append(got, s.Endpoint)
	}
	res.Missing, res.Extra = difference(c.Want, got), difference(got, c.Want)
	return res
}

// summarize sums the paths up per endpoint and per refusal.
func (r *CheckResult) summarize(paths []Path) {
	untouched := true
	for _, p := range paths {
		if p.Note != "" && !slices.Contains(r.Notes, p.Note) {
			r.Notes = append(r.Notes, p.Note)
		}
		switch {
		case p.Verdict == "drop" || p.Verdict == "reject":
			r.Refused += p.Probability
			if !slices.Contains(r.Verdicts, p.Verdict) {
				r.Verdicts = append(r.Verdicts, p.Verdict)
			}
			untouched = false
		case p.Endpoint.IsValid():
			r.addShare(p)
			untouched = false
		}
	}
	r.Untouched = untouched
	slices.SortFunc(r.Reached, func(a, b Share) int { return a.Endpoint.Compare(b.Endpoint) })
}

func (r *CheckResult) addShare(p Path) {
	i := slices.IndexFunc(r.Reached, func(s Share) bool { return s.Endpoint == p.Endpoint })
	if i < 0 {
		r.Reached = append(r.Reached, Share{Endpoint: p.Endpoint})
		i = len(r.Reached) - 1
	}
	r.Reached[i].Probability += p.Probability
	r.Reached[i].Masquerade = r.Reached[i].Masquerade || p.Masquerade
	r.Reached[i].Relayed = r.Reached[i].Relayed || p.Relayed
}

// Affinity timeouts as the rules hold them (a userspace proxy socket's
// is on the path itself): iptables' "-m recent --rcheck
// --seconds N", nftables' "update @set { ... timeout Ns }".
var affinityRules = []*regexp.Regexp{
	regexp.MustCompile(`--rcheck --seconds (\d+)`),
	regexp.MustCompile(`update @\S+ \{ .* timeout (\d+)s \}`),
}

// affinityOf finds the session affinity timeout of the rules a client
// takes; iptables rules show it only to a client the kernel has seen,
// so that one is traced too.
func affinityOf(dp Dataplane, p Probe, paths []Path) int {
	if n := affinityIn(paths); n > 0 {
		return n
	}
	p.Returning = true
	again, err := dp.Trace(p)
	if err != nil {
		return 0
	}
	return affinityIn(again)
}

func affinityIn(paths []Path) int {
	for _, p := range paths {
		if p.AffinitySeconds > 0 {
			return p.AffinitySeconds
		}
		for _, r := range p.Rules {
			for _, re := range affinityRules {
				if m := re.FindStringSubmatch(r); m != nil {
					n, _ := strconv.Atoi(m[1])
					return n
				}
			}
		}
	}
	return 0
}

// difference lists what a holds and b does not.
func difference(a, b []netip.AddrPort) []netip.AddrPort {
	var out []netip.AddrPort
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// OK reports whether the kernel does what the API says for this check.
func (r *CheckResult) OK() bool {
	if r.Err != nil || len(r.Missing) > 0 || len(r.Extra) > 0 {
		return false
	}
	if len(r.Want) == 0 {
		return r.Refused > 0.999999
	}
	return r.Refused < 1e-9 && r.AffinitySeconds == r.WantAffinity
}

// Problems counts the checks whose kernel state differs from the API's.
func (rep Report) Problems() int {
	n := 0
	for _, p := range rep.Ports {
		for i := range p.Checks {
			if !p.Checks[i].OK() {
				n++
			}
		}
	}
	return n
}
