package ipvs_test

import (
	"context"
	"net/netip"
	"sort"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipvstest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

var (
	nodeIP      = netip.MustParseAddr("192.168.0.10")
	clusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
)

// env is a backend on a fake node.
type env struct {
	t     *testing.T
	k     *ipvstest.Kernel
	b     *ipvs.Backend
	clock *clocktesting.FakeClock
	state *proxier.State
}

func newEnv(t *testing.T, mutate ...func(*ipvs.Config)) *env {
	t.Helper()
	k := ipvstest.NewKernel()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	cfg := ipvs.Config{Kernel: k.Kernel, LocalDetector: proxier.DetectByClusterCIDRs(clusterCIDR), Clock: clk}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := ipvs.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	st := &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: "node-a", Addresses: []netip.Addr{nodeIP}},
	}
	return &env{t: t, k: k, b: b, clock: clk, state: st}
}

func spn(name string, proto v1.Protocol) proxier.ServicePortName {
	return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}, Port: "p", Protocol: proto}
}

// svc adds or replaces a TCP service port with a cluster IP.
func (e *env) svc(name, clusterIP string, port uint16, mutate ...func(*proxier.ServicePort)) proxier.ServicePortName {
	n := spn(name, v1.ProtocolTCP)
	sp := &proxier.ServicePort{Name: n, Protocol: v1.ProtocolTCP, Port: port, ClusterIPs: []netip.Addr{netip.MustParseAddr(clusterIP)}}
	for _, m := range mutate {
		m(sp)
	}
	n = sp.Name
	e.state.Services[n] = sp
	return n
}

// eps sets a service port's endpoints: "ip:port" ready and local unless
// marked with a suffix: "!" not ready, "~" serving-terminating, "@" on
// another node.
func (e *env) eps(n proxier.ServicePortName, specs ...string) {
	var out []proxier.Endpoint
	for _, s := range specs {
		ep := proxier.Endpoint{Ready: true, Serving: true, IsLocal: true, NodeName: "node-a"}
		for len(s) > 0 {
			switch s[len(s)-1] {
			case '!':
				ep.Ready, ep.Serving = false, false
			case '~':
				ep.Ready, ep.Serving, ep.Terminating = false, true, true
			case '@':
				ep.IsLocal, ep.NodeName = false, "node-b"
			default:
				goto parsed
			}
			s = s[:len(s)-1]
		}
	parsed:
		ap := netip.MustParseAddrPort(s)
		ep.IP, ep.Port = ap.Addr(), ap.Port()
		out = append(out, ep)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key().Compare(out[j].Key()) < 0 })
	e.state.Endpoints[n] = out
}

func (e *env) sync(diff *proxier.Diff) proxier.SyncResult {
	e.t.Helper()
	res, err := e.b.Sync(context.Background(), e.state, diff)
	if err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
	return res
}

func full() *proxier.Diff { return &proxier.Diff{Full: true} }

func changed(names ...proxier.ServicePortName) *proxier.Diff {
	d := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{}}
	for _, n := range names {
		d.Changed[n] = struct{}{}
	}
	return d
}

// reals returns "ip:port/weight" of a virtual server, or nil if absent.
func (e *env) reals(key string) []string {
	e.t.Helper()
	vs, ok := e.k.IPVS.Service(key)
	if !ok {
		return nil
	}
	out := []string{}
	for _, r := range vs.Reals {
		out = append(out, r.Addr.String()+"/"+strconv.Itoa(r.Weight))
	}
	return out
}
