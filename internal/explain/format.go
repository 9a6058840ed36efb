package explain

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// Write prints the report for an operator; verbose adds the rules of
// every path.
func (rep Report) Write(w io.Writer, verbose bool) {
	svc := rep.Service.Service
	fmt.Fprintf(w, "Service %s/%s (%s) on node %s, %s mode\n", svc.Namespace, svc.Name, svc.Spec.Type, rep.Service.NodeName, rep.Mode)
	if len(rep.Ports) == 0 {
		fmt.Fprintf(w, "  switchyard programs nothing for it: %s\n", unprogrammedReason(svc))
		return
	}
	for _, p := range rep.Ports {
		p.write(w, verbose)
	}
	total := 0
	for _, p := range rep.Ports {
		total += len(p.Checks)
	}
	if n := rep.Problems(); n > 0 {
		fmt.Fprintf(w, "%d of %d addresses differ from what the API says\n", n, total)
	} else {
		fmt.Fprintf(w, "all %d addresses do what the API says\n", total)
	}
}

func unprogrammedReason(svc *v1.Service) string {
	switch {
	case svc.Spec.Type == v1.ServiceTypeExternalName:
		return "an ExternalName Service has no rules"
	case svc.Spec.ClusterIP == v1.ClusterIPNone:
		return "a headless Service has no rules"
	}
	return "it has no valid port or cluster IP of a family this node programs"
}

func (p PortReport) write(w io.Writer, verbose bool) {
	sp := p.Expected.Port
	fmt.Fprintf(w, "  port %s %d/%s", portLabel(sp), sp.Port, sp.Protocol)
	if sp.NodePort != 0 {
		fmt.Fprintf(w, ", NodePort %d", sp.NodePort)
	}
	fmt.Fprintf(w, ": %s\n", endpointCounts(p.Expected.Endpoints))
	fmt.Fprintf(w, "    %s, %s, %s\n", policyName("internal", sp.InternalPolicyLocal), policyName("external", sp.ExternalPolicyLocal), affinityText(int(sp.AffinityTimeoutSeconds)))
	for i := range p.Checks {
		p.Checks[i].write(w, verbose)
	}
}

func portLabel(sp *proxier.ServicePort) string {
	if sp.Name.Port == "" {
		return "(unnamed)"
	}
	return sp.Name.Port
}

// endpointCounts describes the API's endpoints of a port.
func endpointCounts(eps []proxier.Endpoint) string {
	ready, local, terminating := 0, 0, 0
	for _, e := range eps {
		if e.Ready {
			ready++
		}
		if e.IsLocal {
			local++
		}
		if e.Terminating {
			terminating++
		}
	}
	return fmt.Sprintf("%d endpoints in the API (%d ready, %d terminating, %d on this node)", len(eps), ready, terminating, local)
}

func affinityText(seconds int) string {
	if seconds == 0 {
		return "sessionAffinity None"
	}
	return fmt.Sprintf("sessionAffinity ClientIP (%ds)", seconds)
}

func (r *CheckResult) write(w io.Writer, verbose bool) {
	status := "OK"
	if !r.OK() {
		status = "DIFFERS"
	}
	fmt.Fprintf(w, "    %s %s %s, %s: %s\n", familyName(r.Family), r.Kind, r.Probe, r.origin(), status)
	if r.Err != nil {
		fmt.Fprintf(w, "      cannot trace: %v\n", r.Err)
		return
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "      %s\n", n)
	}
	for _, s := range r.Reached {
		fmt.Fprintf(w, "      -> %-24s %5.1f%%%s\n", s.Endpoint, 100*s.Probability, s.source())
	}
	r.writeVerdicts(w)
	if verbose {
		writePaths(w, "      ", r.Paths)
	}
}

// source says which address the endpoint sees the connection from, when
// not the client's own.
func (s Share) source() string {
	switch {
	case s.Relayed:
		return "  relayed " + relaySource(s.Masquerade)
	case s.Masquerade:
		return "  masqueraded"
	}
	return ""
}

// relaySource: a proxy socket connects from the node's address, or with
// --userspace-transparent from the client's.
func relaySource(fromNode bool) string {
	if fromNode {
		return "from the node's address"
	}
	return "from the client's address"
}

func (r *CheckResult) writeVerdicts(w io.Writer) {
	if r.Refused > 0 {
		fmt.Fprintf(w, "      %s %.1f%% of new connections\n", strings.Join(r.Verdicts, "/"), 100*r.Refused)
	}
	if r.Untouched {
		fmt.Fprintf(w, "      no rule for this address: connections go on untouched\n")
	}
	if r.AffinitySeconds != r.WantAffinity {
		fmt.Fprintf(w, "      affinity in the kernel: %s; the API: %s\n", affinityText(r.AffinitySeconds), affinityText(r.WantAffinity))
	}
	if len(r.Want) == 0 && r.Refused < 0.999999 {
		fmt.Fprintf(w, "      the API has no endpoint for this traffic (%s): the kernel should refuse it\n", r.Policy)
	}
	if len(r.Missing) > 0 {
		fmt.Fprintf(w, "      missing in the kernel: %s (%s)\n", addrPorts(r.Missing), r.Policy)
	}
	if len(r.Extra) > 0 {
		fmt.Fprintf(w, "      extra in the kernel (not in the API's selection): %s\n", addrPorts(r.Extra))
	}
}

// origin says where the probe came from.
func (r *CheckResult) origin() string {
	if r.Probe.FromNode {
		return "from this node"
	}
	if r.Probe.InInterface != "" {
		return fmt.Sprintf("from %s via %s", r.Probe.Src, r.Probe.InInterface)
	}
	return "from " + r.Probe.Src.String()
}

func familyName(f v1.IPFamily) string {
	if f == v1.IPv6Protocol {
		return "IPv6"
	}
	return "IPv4"
}

func addrPorts(aps []netip.AddrPort) string {
	s := make([]string, len(aps))
	for i, ap := range aps {
		s[i] = ap.String()
	}
	return strings.Join(s, ", ")
}

// WriteTrace prints every path of a traced probe, rule by rule.
func WriteTrace(w io.Writer, mode string, p Probe, paths []Path) {
	from := "arriving"
	if p.FromNode {
		from = "from this node"
	} else if p.InInterface != "" {
		from = "arriving on " + p.InInterface
	}
	fmt.Fprintf(w, "%s -> %s, %s, %s mode: %d path(s)\n", p.Src, p, from, mode, len(paths))
	writePaths(w, "", paths)
}

func writePaths(w io.Writer, indent string, paths []Path) {
	for i, p := range paths {
		fmt.Fprintf(w, "%spath %d (%.1f%%): %s\n", indent, i+1, 100*p.Probability, outcome(p))
		for _, r := range p.Rules {
			fmt.Fprintf(w, "%s    %s\n", indent, r)
		}
	}
}

// outcome sums up a path: "DNAT to 10.244.1.2:8080, masqueraded".
func outcome(p Path) string {
	var parts []string
	switch {
	case p.Verdict == "drop" || p.Verdict == "reject":
		parts = append(parts, strings.ToUpper(p.Verdict))
	case p.Relayed:
		parts = append(parts, "relayed to "+p.Endpoint.String()+" "+relaySource(p.Masquerade))
	case p.Endpoint.IsValid():
		parts = append(parts, "DNAT to "+p.Endpoint.String())
	default:
		parts = append(parts, "accepted, destination unchanged")
	}
	if p.Masquerade && !p.Relayed {
		parts = append(parts, "masqueraded")
	}
	if p.Note != "" {
		parts = append(parts, p.Note)
	}
	return strings.Join(parts, ", ")
}
