package userspace

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// RelayTablePath is where the daemon serves its RelayTable, read only,
// on its metrics address (as kube-proxy serves /configz there):
// `switchyard explain` reads it in userspace mode, since the endpoints
// each proxy socket relays to live in the daemon, not in the kernel.
const RelayTablePath = "/debug/switchyard/relays"

// RelayTable lists every proxy socket: the local port the rules send a
// service port's traffic to, and where the socket relays it.
type RelayTable struct {
	Relays []Relay `json:"relays"`
}

// Relay is one proxy socket.
type Relay struct {
	Namespace string      `json:"namespace"`
	Name      string      `json:"name"`
	Port      string      `json:"port"` // the service port's name
	Protocol  v1.Protocol `json:"protocol"`
	Family    v1.IPFamily `json:"family"`
	// Traffic is "internal" (cluster IPs, and the external destinations
	// unless the port has an external socket) or "external".
	Traffic string `json:"traffic"`
	// Listen is the socket's address: Config.ListenIP (or the wildcard
	// address of the family) and its ephemeral port.
	Listen netip.AddrPort `json:"listen"`
	// Balancing is how new connections pick an endpoint: "round-robin".
	Balancing string `json:"balancing"`
	// Endpoints are the socket's endpoints, sorted; none means
	// connections are closed at once.
	Endpoints []netip.AddrPort `json:"endpoints"`
	// AffinitySeconds is the ClientIP affinity timeout; 0 for none.
	AffinitySeconds int `json:"affinitySeconds"`
	// FromClient is set when the socket opens some connections from
	// the client's address (Config.Transparent).
	FromClient *RelayTransparency `json:"fromClientAddress,omitempty"`
}

// RelayTransparency: connections to Endpoints are opened from the
// client's own address, except for clients in Except (pods, the node).
type RelayTransparency struct {
	Endpoints []netip.AddrPort `json:"endpoints"`
	Except    []netip.Prefix   `json:"except"`
}

// From reports whether a connection of client to ep keeps the client's
// address.
func (t *RelayTransparency) From(client netip.Addr, ep netip.AddrPort) bool {
	tr := t.transparency()
	return tr.from(client, ep)
}

func (t *RelayTransparency) transparency() *transparency {
	if t == nil {
		return nil
	}
	local := map[netip.AddrPort]bool{}
	for _, ep := range t.Endpoints {
		local[ep] = true
	}
	return &transparency{local: local, inside: t.Except}
}

func relayTransparency(t *transparency) *RelayTransparency {
	if t == nil {
		return nil
	}
	rt := &RelayTransparency{Endpoints: []netip.AddrPort{}, Except: slices.Clone(t.inside)}
	for ep, local := range t.local {
		if local {
			rt.Endpoints = append(rt.Endpoints, ep)
		}
	}
	slices.SortFunc(rt.Endpoints, netip.AddrPort.Compare)
	return rt
}

// RelayTableHandler serves table() as JSON, to GET requests only.
func RelayTableHandler(table func() RelayTable) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "read only", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(table())
	})
}
