package explain

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/switchyard-proxy/switchyard/backends/iptables"
	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/backends/userspace"
	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// The test node: its address, name and pod CIDR.
var (
	testNodeIP  = netip.MustParseAddr("192.168.0.10")
	testNode    = "node-a"
	testPodCIDR = netip.MustParsePrefix("10.244.0.0/16")
)

// webService is a NodePort Service with a cluster IP and a port named
// http, 80 -> 8080.
func webService(mut ...func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeNodePort, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}},
		},
	}
	for _, m := range mut {
		m(svc)
	}
	return svc
}

// slice holds the endpoints ip on node (port 8080, ready).
func slice(name string, eps map[string]string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for ip, node := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(node),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func objects(svc *v1.Service, slices ...*discovery.EndpointSlice) Objects {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: testNodeIP.String()}}}}
	return Objects{Service: svc, Slices: slices, Node: node, NodeName: testNode, Families: []v1.IPFamily{v1.IPv4Protocol}}
}

func fullDiff() *proxier.Diff { return &proxier.Diff{Full: true} }

// iptablesPlaneOf programs the objects with the real iptables backend
// into the iptables fake and reads them back as explain does.
func iptablesPlaneOf(t *testing.T, o Objects) Dataplane {
	t.Helper()
	fake := iptablestest.NewFake()
	b, err := iptables.New(iptables.Config{Runner: fake, Families: o.Families, LocalDetector: proxier.DetectByClusterCIDRs(testPodCIDR)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sync(context.Background(), State(o), fullDiff()); err != nil {
		t.Fatal(err)
	}
	dp, err := ReadIPTables(context.Background(), "iptables", fake, o.Families, nil, []netip.Addr{testNodeIP})
	if err != nil {
		t.Fatal(err)
	}
	return dp
}

// fakeTables reads tables from the nftables fake.
type fakeTables struct{ *nftablestest.Fake }

func (f fakeTables) ReadTable(_ context.Context, fam ruleset.Family, name string) (*ruleset.Table, bool, error) {
	t := f.Table(fam, name)
	return t, t != nil, nil
}

// nftablesPlaneOf programs the objects with the real nftables backend
// into the nftables fake and reads them back as explain does.
func nftablesPlaneOf(t *testing.T, o Objects) Dataplane {
	t.Helper()
	fake := nftablestest.NewFake()
	b, err := nftables.New(nftables.Config{Conn: fake, Families: o.Families, LocalDetector: proxier.DetectByClusterCIDRs(testPodCIDR)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sync(context.Background(), State(o), fullDiff()); err != nil {
		t.Fatal(err)
	}
	dp, err := ReadNFTables(context.Background(), fakeTables{fake}, nftables.TableName, o.Families, []netip.Addr{testNodeIP})
	if err != nil {
		t.Fatal(err)
	}
	return dp
}

// loopbackSockets opens the proxy's listeners on 127.0.0.1 whatever
// address the backend asks for, so unit tests never listen on the host's
// interfaces.
type loopbackSockets struct{ userspace.HostSockets }

func (s loopbackSockets) ListenTCP(addr netip.AddrPort) (*net.TCPListener, error) {
	return s.HostSockets.ListenTCP(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addr.Port()))
}

func (s loopbackSockets) ListenUDP(addr netip.AddrPort) (*net.UDPConn, error) {
	return s.HostSockets.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addr.Port()))
}

// Sentinels listen on loopback too, on ephemeral ports.
func (s loopbackSockets) ListenTransparentTCP(netip.AddrPort) (*net.TCPListener, error) {
	return s.HostSockets.ListenTCP(netip.MustParseAddrPort("127.0.0.1:0"))
}

func (s loopbackSockets) ListenTransparentUDP(netip.AddrPort) (*net.UDPConn, error) {
	return s.HostSockets.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"))
}

// fakeRelays serves a relay table, or fails.
type fakeRelays struct {
	table userspace.RelayTable
	err   error
}

func (f fakeRelays) RelayTable(context.Context) (userspace.RelayTable, error) { return f.table, f.err }

// userspaceSetup is the userspace backend synced into the iptables fake:
// its rules, its relay table, and a socket table holding its listeners.
type userspaceSetup struct {
	fake    *iptablestest.Fake
	relays  userspace.RelayTable
	sockets SocketTable
}

func syncUserspace(t *testing.T, o Objects, mod ...func(*userspace.Config)) userspaceSetup {
	t.Helper()
	fake := iptablestest.NewFake()
	cfg := userspace.Config{Runner: fake, Families: o.Families, LocalDetector: proxier.DetectByClusterCIDRs(testPodCIDR),
		NodeIPs: []netip.Addr{testNodeIP}, Sockets: loopbackSockets{}}
	for _, m := range mod {
		m(&cfg)
	}
	b, err := userspace.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := b.Sync(context.Background(), State(o), fullDiff()); err != nil {
		t.Fatal(err)
	}
	us := userspaceSetup{fake: fake, relays: b.RelayTable(), sockets: SocketTable{}}
	for _, r := range us.relays.Relays {
		us.sockets[r.Protocol] = append(us.sockets[r.Protocol], r.Listen)
	}
	return us
}

// plane reads the setup as explain does, with the daemon's table from
// relays.
func (us userspaceSetup) plane(t *testing.T, o Objects, relays RelayReader) Dataplane {
	t.Helper()
	rules, err := ReadIPTables(context.Background(), "userspace", us.fake, o.Families, nil, []netip.Addr{testNodeIP})
	if err != nil {
		t.Fatal(err)
	}
	return ReadUserspace(context.Background(), UserspaceConfig{Rules: rules, Listeners: us.sockets, Relays: relays})
}

// userspacePlaneOf programs the objects with the real userspace backend
// and reads its rules and relay table back as explain does.
func userspacePlaneOf(t *testing.T, o Objects) Dataplane {
	t.Helper()
	us := syncUserspace(t, o)
	return us.plane(t, o, fakeRelays{table: us.relays})
}

// planes are the modes whose rules the tests program into fakes.
func planes() map[string]func(*testing.T, Objects) Dataplane {
	return map[string]func(*testing.T, Objects) Dataplane{"iptables": iptablesPlaneOf, "nftables": nftablesPlaneOf, "userspace": userspacePlaneOf, "ipvs": ipvsPlaneOf}
}

func eps(n int, node string) map[string]string {
	out := map[string]string{}
	for i := 1; i <= n; i++ {
		out[fmt.Sprintf("10.244.1.%d", i)] = node
	}
	return out
}
