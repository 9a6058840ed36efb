package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// Render turns the snapshot into what the kernel should hold, without
// I/O: a sync calls renderPorts for the ports it must render, which puts
// each port's rendering (renderPort: virtual servers, addresses, set
// entries, filter and nat rules) into the model. rules.go holds the
// iptables text (the static chains and the payload), sets.go the sets.

// portKey names the rendering of one service port in one family.
type portKey struct {
	Family v1.IPFamily
	Name   proxier.ServicePortName
}

func (k portKey) String() string { return k.Name.String() + "/" + string(k.Family) }

// setEntry is one member of one set.
type setEntry struct {
	Set   string
	Entry string
}

// portRender is everything one service port asks of the kernel in one
// family. Render is pure: it depends only on its inputs.
type portRender struct {
	servers []*virtualServer
	addrs   []netip.Addr // bound to kube-ipvs0
	entries []setEntry
	filter  []string // filter-table rules ("-A CHAIN ...")
	nat     []string // nat-table rules
	port    uint16   // the Service port's number (service traffic labels)
}

// renderContext is what every service port of a family renders with.
type renderContext struct {
	family    v1.IPFamily
	scheduler string
	node      proxier.NodeInfo
	nodeAddrs []netip.Addr // NodePort addresses of the family
	markMask  uint32
}

// renderContexts are this sync's contexts, one per configured family.
func renderContexts(c *Config, node proxier.NodeInfo) map[v1.IPFamily]*renderContext {
	out := map[v1.IPFamily]*renderContext{}
	for _, f := range c.families() {
		out[f] = &renderContext{family: f, scheduler: c.scheduler(), node: node,
			nodeAddrs: nodePortAddrs(node.Addresses, f, c.nodePortPrefixes(f)),
			markMask:  c.internalMarkMask()}
	}
	return out
}

// nodePortAddrs are the node's addresses of the family that NodePorts
// listen on.
func nodePortAddrs(all []netip.Addr, f v1.IPFamily, prefixes []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, a := range all {
		a = a.Unmap()
		if proxier.FamilyOf(a) != f {
			continue
		}
		if prefixes == nil || slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// portsToRender are the ports a sync renders: every port the model or
// the state has on a full sync, the ports the diff names otherwise.
func portsToRender(m *model, state *proxier.State, diff *proxier.Diff, full bool) map[proxier.ServicePortName]struct{} {
	if !full {
		if diff == nil {
			return nil
		}
		return diff.Changed
	}
	names := map[proxier.ServicePortName]struct{}{}
	for k := range m.ports {
		names[k.Name] = struct{}{}
	}
	for n := range state.Services {
		names[n] = struct{}{}
	}
	return names
}

// renderPorts renders the named ports in every family into the model and
// returns the kernel objects whose desired state may have changed.
func renderPorts(m *model, state *proxier.State, names map[proxier.ServicePortName]struct{}, contexts map[v1.IPFamily]*renderContext) *touched {
	t := newTouched()
	for n := range names {
		for f, rc := range contexts {
			renderInto(m, rc, portKey{Family: f, Name: n}, state, t)
		}
	}
	m.compact()
	return t
}

// renderInto replaces one port's rendering in the model (a port gone
// from the state is removed).
func renderInto(m *model, rc *renderContext, k portKey, state *proxier.State, t *touched) {
	sp := state.Services[k.Name]
	if sp == nil {
		m.marks.release(k)
		m.set(k, nil, t)
		return
	}
	m.set(k, renderPort(rc, sp, state.Endpoints[k.Name], portMark(m.marks, rc, k, sp)), t)
}

// portMark is the port's internal-traffic fwmark: allocated while it
// needs one (needsMark), 0 otherwise or when none is left.
func portMark(marks *markAllocator, rc *renderContext, k portKey, sp *proxier.ServicePort) uint32 {
	if !needsMark(rc, sp) {
		marks.release(k)
		return 0
	}
	mark := marks.get(k)
	if mark == 0 {
		klog.InfoS("No internal-traffic mark left: pods reach only local endpoints through external addresses",
			"servicePort", k, "mask", fmt.Sprintf("%#x", rc.markMask))
	}
	return mark
}

// selected are the endpoint sets of one service port in one family, from
// the shared selection.
type selected struct {
	sel      proxier.EndpointSelection
	internal []netip.AddrPort // cluster IP (and fwmark) real servers
	external []netip.AddrPort // NodePort, external IP, LB real servers
}

func selectFor(rc *renderContext, sp *proxier.ServicePort, eps []proxier.Endpoint) selected {
	s := selected{sel: proxier.SelectEndpoints(sp, eps, rc.node, rc.family)}
	s.internal = endpointKeys(s.sel.Internal(sp))
	s.external = endpointKeys(s.sel.External(sp))
	return s
}

func endpointKeys(eps []proxier.Endpoint) []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.Key())
	}
	slices.SortFunc(out, netip.AddrPort.Compare)
	return slices.Compact(out)
}

// renderPort renders one service port. mark is its internal-traffic
// fwmark (0: none, see needsMark).
func renderPort(rc *renderContext, sp *proxier.ServicePort, eps []proxier.Endpoint, mark uint32) *portRender {
	s := selectFor(rc, sp, eps)
	r := &portRender{port: sp.Port}
	renderServers(rc, r, sp, s, mark)
	renderSets(rc, r, sp)
	renderRules(rc, r, sp, s, mark)
	return r
}

// externalAddrs are the port's external IPs and load-balancer IPs of the
// family.
func externalAddrs(f v1.IPFamily, sp *proxier.ServicePort) (ext, lb []netip.Addr) {
	return ofFamily(f, sp.ExternalIPs), ofFamily(f, sp.LoadBalancerIPs)
}

func ofFamily(f v1.IPFamily, addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if proxier.FamilyOf(a) == f {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// needsMark reports whether the port gets an internal-traffic fwmark
// service in the family: externalTrafficPolicy Local with some external
// address, so pods and the node reach every endpoint (like kube-proxy's
// iptables mode) while outside clients reach only local ones.
func needsMark(rc *renderContext, sp *proxier.ServicePort) bool {
	if !sp.ExternalPolicyLocal {
		return false
	}
	ext, lb := externalAddrs(rc.family, sp)
	return len(ext) > 0 || len(lb) > 0 || (sp.NodePort != 0 && len(rc.nodeAddrs) > 0)
}

func renderServers(rc *renderContext, r *portRender, sp *proxier.ServicePort, s selected, mark uint32) {
	add := func(k vsKey, dests []netip.AddrPort) {
		k.Family = rc.family
		v := &virtualServer{Key: k, Scheduler: rc.scheduler, Dests: dests}
		if sp.AffinityTimeoutSeconds > 0 {
			v.Timeout = uint32(sp.AffinityTimeoutSeconds)
		}
		r.servers = append(r.servers, v)
	}
	if ip, ok := sp.ClusterIP(rc.family); ok {
		add(vsKey{Proto: sp.Protocol, Addr: ip.Unmap(), Port: sp.Port}, s.internal)
		r.addrs = append(r.addrs, ip.Unmap())
	}
	ext, lb := externalAddrs(rc.family, sp)
	for _, ip := range slices.Concat(ext, lb) {
		add(vsKey{Proto: sp.Protocol, Addr: ip, Port: sp.Port}, s.external)
		r.addrs = append(r.addrs, ip)
	}
	if sp.NodePort != 0 {
		for _, ip := range rc.nodeAddrs {
			add(vsKey{Proto: sp.Protocol, Addr: ip, Port: sp.NodePort}, s.external)
		}
	}
	if mark != 0 {
		add(vsKey{Mark: mark}, s.internal)
	}
}

func renderSets(rc *renderContext, r *portRender, sp *proxier.ServicePort) {
	f := rc.family
	proto := strings.ToLower(string(sp.Protocol))
	put := func(s setKind, e ipset.Entry) {
		r.entries = append(r.entries, setEntry{Set: s.name(f), Entry: e.Format(s.typ)})
	}
	if ip, ok := sp.ClusterIP(f); ok {
		put(setClusterIP, ipset.Entry{IP: ip.Unmap(), Proto: proto, Port: sp.Port})
	}
	ext, lb := externalAddrs(f, sp)
	for _, ip := range ext {
		set := setExternalIP
		if sp.ExternalPolicyLocal {
			set = setExternalIPLocal
		}
		put(set, ipset.Entry{IP: ip, Proto: proto, Port: sp.Port})
	}
	for _, ip := range lb {
		e := ipset.Entry{IP: ip, Proto: proto, Port: sp.Port}
		put(setLoadBalancer, e)
		if sp.ExternalPolicyLocal {
			put(setLoadBalancerLocal, e)
		}
		renderSourceRanges(f, sp, e, put)
	}
	if sp.NodePort != 0 {
		all, local := nodePortSets(sp.Protocol)
		put(all, ipset.Entry{Port: sp.NodePort})
		if sp.ExternalPolicyLocal {
			put(local, ipset.Entry{Port: sp.NodePort})
		}
	}
	seen := map[netip.AddrPort]bool{}
	for _, v := range r.servers {
		for _, d := range v.Dests {
			if !seen[d] {
				seen[d] = true
				put(setLoopBack, ipset.Entry{IP: d.Addr(), Proto: proto, Port: d.Port(), IP2: d.Addr()})
			}
		}
	}
}

// renderSourceRanges fills the loadBalancerSourceRanges sets: the LB
// ip:port is firewalled, each allowed source range let through.
func renderSourceRanges(f v1.IPFamily, sp *proxier.ServicePort, lb ipset.Entry, put func(setKind, ipset.Entry)) {
	var ranges []netip.Prefix
	for _, p := range sp.LoadBalancerSourceRanges {
		if p.IsValid() && proxier.FamilyOfPrefix(p) == f {
			ranges = append(ranges, p.Masked())
		}
	}
	if len(ranges) == 0 {
		return
	}
	put(setLoadBalancerFW, lb)
	for _, p := range ranges {
		e := lb
		e.Net = p
		put(setLoadBalancerSourceCIDR, e)
	}
}
