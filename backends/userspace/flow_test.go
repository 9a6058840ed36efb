package userspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// flowModel answers the shared packet-flow table for the userspace
// backend: the fake's packet tracer says where the rules send a packet
// (a proxy socket, REJECT, DROP, or nowhere) and the proxy socket's own
// balancer says which endpoints the connection may reach.
//
// The tracer models DNAT but not REDIRECT, so the model traces a copy of
// the rules in which "REDIRECT --to-ports P" reads "DNAT --to-destination
// nodeIP:P". In nat PREROUTING, REDIRECT is DNAT to the primary address of
// the interface the packet came in on; the fixture's node has one address
// per family, so the two are the same.
//
// The proxy always connects to endpoints from the node itself, so every
// flow is in effect masqueraded and the table's masquerade column (which
// describes kube-proxy's NAT) does not apply: MasqChecked stays false.
type flowModel struct {
	// mark is what mangle PREROUTING sets on packets from outside the
	// node while the proxy's sentinels listen; 0 models a node whose
	// daemon is not running (the kernel fallback).
	mark    uint32
	b       *Backend
	traced  map[runner.Family]*iptablestest.Fake
	raw     *iptablestest.Fake
	nodeIPs []netip.Addr
}

func newFlowModel(t *testing.T, b *Backend, fake *iptablestest.Fake, nodeIPs []netip.Addr) *flowModel {
	t.Helper()
	m := &flowModel{b: b, raw: fake, traced: map[runner.Family]*iptablestest.Fake{}, nodeIPs: nodeIPs, mark: b.cfg.mark()}
	for _, ip := range nodeIPs {
		fam := runnerFamily(familyOf(ip))
		traced, err := redirectAsDNAT(fake, fam, ip)
		if err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		m.traced[fam] = traced
	}
	return m
}

var redirectRE = regexp.MustCompile(`-j REDIRECT --to-ports ([0-9]+)`)

// redirectAsDNAT loads the fake's nat and filter tables into a new fake,
// with REDIRECT rewritten as DNAT to nodeIP.
func redirectAsDNAT(fake *iptablestest.Fake, fam runner.Family, nodeIP netip.Addr) (*iptablestest.Fake, error) {
	to := "-j DNAT --to-destination " + nodeIP.String() + ":$1"
	if nodeIP.Is6() {
		to = "-j DNAT --to-destination [" + nodeIP.String() + "]:$1"
	}
	payload := redirectRE.ReplaceAllString(fake.Dump(fam, "nat")+fake.Dump(fam, "filter"), to)
	out := iptablestest.NewFake()
	if err := out.Restore(context.Background(), fam, []byte(payload)); err != nil {
		return nil, fmt.Errorf("load rewritten rules: %w", err)
	}
	return out, nil
}

func (m *flowModel) Flow(p flowtest.Packet) (flowtest.Expect, error) {
	fam := runnerFamily(familyOf(p.DstIP))
	traced := m.traced[fam]
	if traced == nil {
		// No node IP of the family: the node does not program it, and
		// the backend's own rules of that family are traced unchanged.
		traced = m.raw
	}
	res, err := traced.Trace(fam, iptablestest.Packet{
		SrcIP: p.SrcIP, DstIP: p.DstIP, DstPort: p.DstPort, SrcPort: 40000,
		Protocol: strings.ToLower(string(p.Protocol)), Local: p.SrcLocal, NodeIPs: m.nodeIPs, Mark: m.markFor(p),
		InInterface: p.InInterface,
	})
	if err != nil {
		return flowtest.Expect{}, err
	}
	out := flowtest.Expect{Reject: res.Rejected, Drop: res.Dropped}
	for _, dnat := range res.Endpoints {
		eps, err := m.balancerPicks(familyOf(p.DstIP), p.Protocol, dnat)
		if err != nil {
			return flowtest.Expect{}, err
		}
		out.Endpoints = append(out.Endpoints, eps...)
	}
	return out, nil
}

func (m *flowModel) markFor(p flowtest.Packet) uint32 {
	if p.SrcLocal {
		return 0 // mangle PREROUTING never sees it
	}
	return m.mark
}

// balancerPicks finds the proxy socket a traced packet of proto was sent
// to and returns every endpoint its balancer picks for new clients (on a
// copy, so the real rotation is untouched).
func (m *flowModel) balancerPicks(fam v1.IPFamily, proto v1.Protocol, dnat string) ([]string, error) {
	ap, err := netip.ParseAddrPort(dnat)
	if err != nil {
		return nil, err
	}
	if m.mark == 0 && !slices.Contains(m.nodeIPs, ap.Addr()) {
		return []string{dnat}, nil // the fallback DNATs to an endpoint
	}
	if !slices.Contains(m.nodeIPs, ap.Addr()) {
		return nil, fmt.Errorf("traffic sent to %s, not to a proxy socket on a node address", dnat)
	}
	bal := m.socketAt(fam, proto, ap.Port())
	if bal == nil {
		return nil, fmt.Errorf("traffic sent to %s: no %s %s proxy socket on port %d", dnat, fam, proto, ap.Port())
	}
	c := &balancer{clock: bal.clock, endpoints: bal.snapshot(), affinity: bal.affinity, sticky: map[netip.Addr]stickyEntry{}}
	seen := map[string]bool{}
	var out []string
	for i := range 2 * len(c.endpoints) {
		ep, ok := c.pick(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), nil)
		if ok && !seen[ep.String()] {
			seen[ep.String()] = true
			out = append(out, ep.String())
		}
	}
	return out, nil
}

// socketAt is the balancer of the proxy socket the kernel delivers a
// packet of fam and proto for port to. The protocol is part of the socket's
// address: TCP and UDP ports are separate spaces, so the kernel may give a
// TCP and a UDP proxy socket of a family the same ephemeral port.
func (m *flowModel) socketAt(fam v1.IPFamily, proto v1.Protocol, port uint16) *balancer {
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	for key, s := range m.b.relays.sockets {
		if key.family == fam && key.name.Protocol == proto && s.port() == port {
			return s.balancer()
		}
	}
	return nil
}

func flowBackend(t *testing.T, node flowtest.NodeConfig) *testEnv {
	return newTestEnv(t, func(c *Config) {
		c.Families = node.Families
		c.NodeIPs = node.NodeIPs
		c.LocalDetector = node.LocalDetector
	})
}

// TestFlowTable runs the shared packet-flow table against the rules and
// balancers of a full sync of the fixture.
func TestFlowTable(t *testing.T) {
	state, node := flowtest.Fixture()
	env := flowBackend(t, node)
	env.sync(t, state)
	flowtest.Run(t, newFlowModel(t, env.b, env.fake, node.NodeIPs), remotePodIsExternal)
	flowtest.Untouched(t, state)
}

// TestFlowTableByDetector runs the table once per local-traffic
// detector: the rules' "-s CIDR", "-i cbr0" or "-i cali+" send pod
// traffic to external destinations of externalTrafficPolicy Local ports
// to the internal socket.
func TestFlowTableByDetector(t *testing.T) {
	flowtest.RunDetectors(t, syncedFlowModel, remotePodIsExternal)
}

// TestFlowTableShapes runs the table on single-stack IPv4, single-stack
// IPv6 and dual-stack nodes, with every detector ("none" being a node
// without any cluster CIDR): sockets and rules per family programmed.
func TestFlowTableShapes(t *testing.T) {
	flowtest.RunShapes(t, syncedFlowModel, remotePodIsExternal)
}

// syncedFlowModel is the model of a backend built as node asks and
// synced with state.
func syncedFlowModel(t *testing.T, state *proxier.State, node flowtest.NodeConfig) flowtest.Model {
	env := flowBackend(t, node)
	env.sync(t, state)
	return newFlowModel(t, env.b, env.fake, node.NodeIPs)
}

// remotePodIsExternal: the userspace mode narrows a source-CIDR detector
// to this node's pod CIDR for the short-circuit (renderConfig.localPods,
// for upstream's e2e suite), so a pod of another node reaching a NodePort
// of an externalTrafficPolicy Local service is external traffic.
var remotePodIsExternal = flowtest.Deviation{Variant: "ClusterCIDR", Case: "remote pod to eTP=Local NodePort: short-circuited only by cluster CIDR",
	Expect: flowtest.Expect{Endpoints: []string{"10.244.1.30:8080"}},
	Why:    "the userspace mode narrows a source-CIDR detector to this node's pod CIDR (renderConfig.localPods)"}

// TestFlowTableFallback runs the table against the same rules with no
// proxy running (no sentinel marks packets): connections from outside the
// node reach the same endpoints through the kernel fallback.
func TestFlowTableFallback(t *testing.T) {
	state, node := flowtest.Fixture()
	env := flowBackend(t, node)
	env.sync(t, state)
	m := newFlowModel(t, env.b, env.fake, node.NodeIPs)
	m.mark = 0
	flowtest.Run(t, m, remotePodIsExternal)
}

// TestFlowTableAfterChanges reaches the fixture from a state without
// endpoints, then with every endpoint, a service removed and re-added:
// the rules and balancers in force behave the same.
func TestFlowTableAfterChanges(t *testing.T) {
	state, node := flowtest.Fixture()
	env := flowBackend(t, node)
	empty := cloneState(state)
	for n := range empty.Endpoints {
		empty.Endpoints[n] = nil
	}
	env.sync(t, empty)
	var some proxier.ServicePortName
	for n := range state.Services {
		some = n
		break
	}
	gone := cloneState(state)
	delete(gone.Services, some)
	delete(gone.Endpoints, some)
	for _, st := range []*proxier.State{state, gone, state} {
		if _, err := env.b.Sync(t.Context(), st, &proxier.Diff{}); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	}
	flowtest.Run(t, newFlowModel(t, env.b, env.fake, node.NodeIPs), remotePodIsExternal)
}

// sharedPortSockets gives the backend's first TCP and first UDP proxy
// socket one port number. The kernel allocates TCP and UDP ephemeral ports
// independently, so a TCP and a UDP proxy socket of a family share a port
// now and then by chance; this makes it happen every time.
type sharedPortSockets struct {
	loopbackSockets
	tcp *net.TCPListener
	udp *net.UDPConn
}

// newSharedPortSockets opens the pair up front, on a loopback port free in
// both protocols: trying a few ephemeral TCP ports finds one, since another
// process's UDP socket on it is the only obstacle.
func newSharedPortSockets(t *testing.T) *sharedPortSockets {
	t.Helper()
	for range 100 {
		ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ln.Addr().(*net.TCPAddr).Port})
		if err == nil {
			s := &sharedPortSockets{tcp: ln, udp: c}
			t.Cleanup(s.closeUnused)
			return s
		}
		ln.Close()
	}
	t.Fatal("no loopback port free for both TCP and UDP")
	return nil
}

// ListenTCP hands over the pair's TCP socket for the first ephemeral
// listener (the backend calls it under its lock only).
func (s *sharedPortSockets) ListenTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	if ln := s.tcp; ln != nil && addr.Port() == 0 && addr.Addr().Unmap().Is4() {
		s.tcp = nil
		return ln, nil
	}
	return s.loopbackSockets.ListenTCP(addr)
}

// ListenUDP does the same with the pair's UDP socket.
func (s *sharedPortSockets) ListenUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	if c := s.udp; c != nil && addr.Port() == 0 && addr.Addr().Unmap().Is4() {
		s.udp = nil
		return c, nil
	}
	return s.loopbackSockets.ListenUDP(addr)
}

func (s *sharedPortSockets) closeUnused() {
	if s.tcp != nil {
		s.tcp.Close()
	}
	if s.udp != nil {
		s.udp.Close()
	}
}

// TestFlowModelTellsProtocolsApart: with a TCP and a UDP proxy socket on
// one port number, each protocol's packets reach their own socket's
// endpoints. TestFlowTableShapes once answered a UDP service's packet with
// a TCP socket's (empty) endpoint list when the model looked sockets up by
// family and port alone.
func TestFlowModelTellsProtocolsApart(t *testing.T) {
	env := newTestEnv(t, func(c *Config) { c.Sockets = newSharedPortSockets(t) })
	st := newState()
	web, dns := spName("web", v1.ProtocolTCP), spName("dns", v1.ProtocolUDP)
	addService(st, web, "10.96.0.10", 80, netip.MustParseAddrPort("10.244.1.2:8080"))
	addService(st, dns, "10.96.0.53", 53, netip.MustParseAddrPort("10.244.1.7:53"))
	env.sync(t, st)
	tcpPort, _ := env.b.ProxyPort(web, v1.IPv4Protocol, false)
	udpPort, _ := env.b.ProxyPort(dns, v1.IPv4Protocol, false)
	if tcpPort != udpPort {
		t.Fatalf("proxy ports: TCP %d, UDP %d; the injection must give both one port", tcpPort, udpPort)
	}
	m := newFlowModel(t, env.b, env.fake, st.Node.Addresses)
	cases := []struct {
		proto v1.Protocol
		dst   string
		port  uint16
		want  string
	}{{v1.ProtocolTCP, "10.96.0.10", 80, "10.244.1.2:8080"}, {v1.ProtocolUDP, "10.96.0.53", 53, "10.244.1.7:53"}}
	// The model's sockets map is iterated in random order: asking a few
	// times catches a lookup that finds the other protocol's socket first.
	for range 16 {
		for _, c := range cases {
			p := flowtest.Packet{SrcIP: netip.MustParseAddr("10.244.1.99"), DstIP: netip.MustParseAddr(c.dst),
				DstPort: c.port, Protocol: c.proto, InInterface: "cbr0"}
			got, err := m.Flow(p)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if d := flowtest.Diff(flowtest.Expect{Endpoints: []string{c.want}}, got); d != "" {
				t.Fatalf("%s (-want +got):\n%s", p, d)
			}
		}
	}
}
