package explain

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/moby/ipvs"

	ipvsmode "github.com/switchyard-proxy/switchyard/backends/ipvs"
	v1 "k8s.io/api/core/v1"
)

// IPVSReader reads the kernel's IPVS table: github.com/moby/ipvs'
// *Handle, the ipvs backend's IPVS interface and its fake all have these
// two reads, the only calls explain makes.
type IPVSReader interface {
	GetServices() ([]*ipvs.Service, error)
	GetDestinations(*ipvs.Service) ([]*ipvs.Destination, error)
}

// virtualServer is one IPVS virtual service as the kernel holds it.
type virtualServer struct {
	Family    v1.IPFamily
	Proto     v1.Protocol // "" for a fwmark service
	Addr      netip.AddrPort
	FWMark    uint32
	Scheduler string
	// Timeout is the persistence timeout (sessionAffinity ClientIP);
	// 0 when the service is not persistent.
	Timeout uint32
	Dests   []realServer
}

// realServer is one destination, in the kernel's order.
type realServer struct {
	Addr             netip.AddrPort
	Weight           int
	Forward          uint32 // ipvs.ConnectionFlagFwdMask bits
	Active, Inactive int
}

const ipvsPersistent = 0x0001 // IP_VS_SVC_F_PERSISTENT

// readVirtualServers reads every virtual service with its destinations;
// nil r (IPVS is not loaded) holds none.
func readVirtualServers(r IPVSReader) ([]virtualServer, error) {
	if r == nil {
		return nil, nil
	}
	svcs, err := r.GetServices()
	if err != nil {
		return nil, fmt.Errorf("listing IPVS virtual services: %w", err)
	}
	out := make([]virtualServer, 0, len(svcs))
	for _, s := range svcs {
		vs, ok := virtualServerOf(s)
		if !ok {
			continue // a family or protocol no probe can have
		}
		dests, err := r.GetDestinations(s)
		if err != nil {
			return nil, fmt.Errorf("listing the real servers of IPVS %s: %w", &vs, err)
		}
		for _, d := range dests {
			a, _ := netip.AddrFromSlice(d.Address)
			vs.Dests = append(vs.Dests, realServer{Addr: netip.AddrPortFrom(a.Unmap(), d.Port), Weight: d.Weight,
				Forward: d.ConnectionFlags & ipvs.ConnectionFlagFwdMask, Active: d.ActiveConnections, Inactive: d.InactiveConnections})
		}
		out = append(out, vs)
	}
	return out, nil
}

func virtualServerOf(s *ipvs.Service) (virtualServer, bool) {
	vs := virtualServer{Scheduler: s.SchedName}
	var ok bool
	vs.Family, vs.Proto, vs.Addr, vs.FWMark, ok = ipvsmode.ServiceKey(s)
	if ok && s.Flags&ipvsPersistent != 0 {
		vs.Timeout = s.Timeout
	}
	return vs, ok
}

// String is "TCP 10.96.0.10:80 (rr)" or "FWM 0x10000 IPv4 (rr)".
func (v *virtualServer) String() string {
	if v.FWMark != 0 {
		return fmt.Sprintf("FWM %#x %s (%s)", v.FWMark, v.Family, v.Scheduler)
	}
	return fmt.Sprintf("%s %s (%s)", v.Proto, v.Addr, v.Scheduler)
}

// lookupVirtualServer finds the service IPVS schedules a new connection
// by, as the kernel does: a fwmark service of the packet's whole mark
// and family first, then the service of its protocol, address and port.
func lookupVirtualServer(vss []virtualServer, mark uint32, proto v1.Protocol, dst netip.AddrPort) *virtualServer {
	fam := v1.IPv4Protocol
	if dst.Addr().Is6() {
		fam = v1.IPv6Protocol
	}
	for i := range vss {
		if mark != 0 && vss[i].FWMark == mark && vss[i].Family == fam {
			return &vss[i]
		}
	}
	for i := range vss {
		if vss[i].FWMark == 0 && vss[i].Proto == proto && vss[i].Addr == dst {
			return &vss[i]
		}
	}
	return nil
}

// shares is the chance that a new connection goes to each real server
// and a note saying how the scheduler picks. Weight 0 is a draining real
// server: no scheduler gives it a new connection.
func (v *virtualServer) shares() ([]float64, string) {
	weights := make([]float64, len(v.Dests))
	top := 0
	for i, d := range v.Dests {
		top = max(top, d.Weight)
		if d.Weight > 0 {
			weights[i] = float64(d.Weight)
		}
	}
	switch v.Scheduler {
	case "rr", "lc":
		for i := range weights { // weights only exclude
			weights[i] = min(weights[i], 1)
		}
	case "fo", "ovf":
		for i, d := range v.Dests { // the highest weight takes them all
			weights[i] = 0
			if d.Weight > 0 && d.Weight == top {
				weights[i] = 1
			}
		}
	}
	return normalize(weights), v.note()
}

func normalize(w []float64) []float64 {
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	for i := range w {
		if sum > 0 {
			w[i] /= sum
		}
	}
	return w
}

// schedulerNotes say what the shares of each scheduler mean.
var schedulerNotes = map[string]string{
	"rr":  "round-robin: in turn over the real servers of weight > 0",
	"wrr": "weighted round-robin: shares by weight",
	"lc":  "least-connection: the real server with the fewest connections; equal shares while they are equally busy",
	"wlc": "weighted least-connection: fewest connections per weight; shares by weight while equally busy",
	"sed": "shortest expected delay: shares by weight while equally busy",
	"nq":  "never queue: an idle real server first, else shares by weight",
	"sh":  "source hashing: one client always reaches the same real server; the shares are over many clients, by weight",
	"mh":  "maglev hashing (of the source): one client stays on one real server; the shares are over many clients, by weight",
	"dh":  "destination hashing: every connection to this address reaches the same one real server, which the kernel's hash picks (explain shows the shares by weight, not which one)",
	"fo":  "weighted failover: every connection goes to the available real server of highest weight",
	"ovf": "overflow: the real server of highest weight until its active connections reach its weight",
}

func (v *virtualServer) note() string {
	n, ok := schedulerNotes[v.Scheduler]
	if !ok {
		n = "scheduler " + v.Scheduler + " is not modelled: shares by weight"
	}
	parts := []string{"IPVS " + v.String() + ": " + n}
	if v.Timeout > 0 {
		parts = append(parts, fmt.Sprintf("persistent for %ds: a client that returns in time reaches its earlier real server", v.Timeout))
	}
	var draining []string
	for _, d := range v.Dests {
		if d.Weight <= 0 {
			draining = append(draining, fmt.Sprintf("%s (%d active, %d inactive connections)", d.Addr, d.Active, d.Inactive))
		}
	}
	if len(draining) > 0 {
		parts = append(parts, "draining (weight 0, no new connection): "+strings.Join(draining, ", "))
	}
	return strings.Join(parts, "; ")
}

// forwardName names a forwarding method other than masquerading (NAT).
func forwardName(f uint32) string {
	switch f {
	case ipvs.ConnectionFlagMasq:
		return ""
	case ipvs.ConnectionFlagLocalNode:
		return "local node"
	case ipvs.ConnectionFlagTunnel:
		return "tunnel"
	case ipvs.ConnectionFlagDirectRoute:
		return "direct routing"
	}
	return fmt.Sprintf("forwarding %#x", f)
}
