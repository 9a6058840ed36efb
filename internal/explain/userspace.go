package explain

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// userspacePlane is the userspace mode. Its iptables rules send a service
// address to a local port (REDIRECT, or DNAT to the node's address),
// where the daemon's proxy socket relays each connection to an endpoint,
// round-robin. The rules are traced as in iptables mode; a path that the
// rules send to a proxy port is followed to the socket there: the
// namespace's socket table says whether one listens, the daemon's relay
// table (which only the daemon holds) where it relays.
type userspacePlane struct {
	rules     Dataplane
	listeners Listeners
	relays    []userspace.Relay
	relaysErr error
	mark      uint32
}

// UserspaceConfig is what ReadUserspace reads.
type UserspaceConfig struct {
	// Rules are the live iptables rules (ReadIPTables, mode userspace).
	Rules     Dataplane
	Listeners Listeners
	Relays    RelayReader
	// SentinelMark is the mark the mangle rules set on a packet whose
	// destination a sentinel socket holds (--userspace-restart-fallback);
	// 0 when the daemon runs without sentinels.
	SentinelMark uint32
}

// ReadUserspace reads the daemon's relay table once. A table that cannot
// be read is no error here: every path to a proxy socket then reports
// it, and paths the rules end (REJECT, DROP) are still traced.
func ReadUserspace(ctx context.Context, cfg UserspaceConfig) Dataplane {
	t, err := cfg.Relays.RelayTable(ctx)
	return &userspacePlane{rules: cfg.Rules, listeners: cfg.Listeners, relays: t.Relays, relaysErr: err, mark: cfg.SentinelMark}
}

func (p *userspacePlane) Mode() string             { return "userspace" }
func (p *userspacePlane) LocalAddrs() []netip.Addr { return p.rules.LocalAddrs() }

// Trace implements Dataplane.
func (p *userspacePlane) Trace(pr Probe) ([]Path, error) {
	pr, sentinel := p.marked(pr)
	paths, err := p.rules.Trace(pr)
	if err != nil {
		return nil, err
	}
	var out []Path
	for _, path := range paths {
		if !p.toProxy(path) {
			if p.mark != 0 && !pr.FromNode && !sentinel && path.Endpoint.IsValid() {
				path.Note = fmt.Sprintf("no socket holds %s (the proxy's sentinel): the kernel fallback DNATs it straight to an endpoint", netip.AddrPortFrom(pr.Dst, pr.Port))
			}
			out = append(out, path)
			continue
		}
		relayed, err := p.follow(pr, path)
		if err != nil {
			return nil, err
		}
		out = append(out, relayed...)
	}
	return out, nil
}

// marked gives a probe from outside the mark the mangle rules set when a
// sentinel socket holds its destination (`-m socket --transparent`; the
// mangle table is not traced, the socket table stands for it).
func (p *userspacePlane) marked(pr Probe) (Probe, bool) {
	if p.mark == 0 || pr.FromNode || !p.listeners.Listening(pr.Protocol, netip.AddrPortFrom(pr.Dst, pr.Port)) {
		return pr, false
	}
	pr.Mark |= p.mark
	return pr, true
}

// toProxy: the rules sent the path to a local port that is (or, with no
// relay table, may be) a proxy socket's. A DNAT to a local address that
// no proxy socket has is a host-network endpoint.
func (p *userspacePlane) toProxy(path Path) bool {
	ep := path.Endpoint
	if path.Verdict != "accept" || !ep.IsValid() || !p.isLocal(ep.Addr()) {
		return false
	}
	return path.Redirected || p.relaysErr != nil || slices.ContainsFunc(p.relays, func(r userspace.Relay) bool { return r.Listen.Port() == ep.Port() })
}

func (p *userspacePlane) isLocal(a netip.Addr) bool {
	return a.IsLoopback() || slices.Contains(p.LocalAddrs(), a)
}

// follow replaces a path to a proxy port by the socket's endpoints, each
// with an equal share (round-robin), or by a refusal when nothing
// listens there or the socket has no endpoint.
func (p *userspacePlane) follow(pr Probe, path Path) ([]Path, error) {
	ep := path.Endpoint
	end := path
	end.Endpoint = netip.AddrPort{}
	if !p.listeners.Listening(pr.Protocol, ep) {
		end.Verdict = "reject"
		end.Note = fmt.Sprintf("the rules send it to local port %d/%s, where no socket listens: the node refuses it", ep.Port(), pr.Protocol)
		return []Path{end}, nil
	}
	if p.relaysErr != nil {
		return nil, fmt.Errorf("the rules send it to the proxy socket on local port %d/%s, whose endpoints only the daemon knows: %w", ep.Port(), pr.Protocol, p.relaysErr)
	}
	r, ok := p.relayAt(pr.Protocol, proxier.FamilyOf(pr.Dst), ep.Port())
	if !ok {
		return nil, fmt.Errorf("a socket listens on local port %d/%s, where the rules send it, but the daemon has no proxy socket there (another program's socket, or another daemon's rules?)", ep.Port(), pr.Protocol)
	}
	if len(r.Endpoints) == 0 {
		end.Verdict = "reject"
		end.Note = relayName(r) + " has no endpoint: it closes connections at once"
		return []Path{end}, nil
	}
	out := make([]Path, 0, len(r.Endpoints))
	for _, e := range r.Endpoints {
		out = append(out, Path{Verdict: "accept", Endpoint: e, Masquerade: !r.FromClient.From(pr.Src, e), Relayed: true,
			Probability: path.Probability / float64(len(r.Endpoints)), Rules: path.Rules, AffinitySeconds: r.AffinitySeconds,
			Note: fmt.Sprintf("%s relays it round-robin over %d endpoint(s)", relayName(r), len(r.Endpoints))})
	}
	return out, nil
}

func (p *userspacePlane) relayAt(proto v1.Protocol, fam v1.IPFamily, port uint16) (userspace.Relay, bool) {
	i := slices.IndexFunc(p.relays, func(r userspace.Relay) bool {
		return r.Protocol == proto && r.Family == fam && r.Listen.Port() == port
	})
	if i < 0 {
		return userspace.Relay{}, false
	}
	return p.relays[i], true
}

// relayName: `the proxy socket 0.0.0.0:41234/TCP of default/web:http
// (internal traffic)`.
func relayName(r userspace.Relay) string {
	port := r.Port
	if port == "" {
		port = "(unnamed)"
	}
	return fmt.Sprintf("the proxy socket %s/%s of %s/%s:%s (%s traffic)", r.Listen, r.Protocol, r.Namespace, r.Name, port, r.Traffic)
}
