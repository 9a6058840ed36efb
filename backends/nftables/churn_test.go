package nftables_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// churnService is a service shaped like kube-dns: UDP and TCP ports with
// the same target port (so their endpoint groups hold the same
// addresses) and a third port, all backed by the same pods.
type churnService struct {
	name      string
	clusterIP netip.Addr
	nodePort  uint16 // on the UDP port; 0: none
	local     bool   // externalTrafficPolicy Local
	affinity  bool
	pods      []proxier.Endpoint // template endpoints (port 0)
	exists    bool
}

var churnPorts = []struct {
	name   string
	proto  v1.Protocol
	port   uint16
	target uint16
}{
	{"dns", v1.ProtocolUDP, 53, 53},
	{"dns-tcp", v1.ProtocolTCP, 53, 53},
	{"metrics", v1.ProtocolTCP, 9153, 9153},
}

func (s *churnService) portName(i int) proxier.ServicePortName {
	return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "kube-system", Name: s.name},
		Port: churnPorts[i].name, Protocol: churnPorts[i].proto}
}

// write puts the service's ports and endpoints into st and their names
// into diff.
func (s *churnService) write(st *proxier.State, diff *proxier.Diff) {
	for i, p := range churnPorts {
		n := s.portName(i)
		diff.Changed[n] = struct{}{}
		if !s.exists {
			if old := st.Services[n]; old != nil {
				diff.Deleted[n] = old
			}
			delete(st.Services, n)
			delete(st.Endpoints, n)
			continue
		}
		sp := &proxier.ServicePort{Name: n, Protocol: p.proto, Port: p.port, ClusterIPs: []netip.Addr{s.clusterIP},
			ExternalPolicyLocal: s.local && s.nodePort != 0}
		if i == 0 {
			sp.NodePort = s.nodePort
		}
		if s.affinity {
			sp.AffinityTimeoutSeconds = 10800
		}
		st.Services[n] = sp
		eps := make([]proxier.Endpoint, len(s.pods))
		for k, e := range s.pods {
			e.Port = p.target
			eps[k] = e
		}
		slices.SortFunc(eps, func(a, b proxier.Endpoint) int { return a.Key().Compare(b.Key()) })
		st.Endpoints[n] = eps
	}
}

// churn changes one service the way a cluster does: pods replaced all
// at once (CoreDNS pods deleted), one pod going through terminating,
// readiness flips, scale up and down, the service deleted and created.
func (s *churnService) churn(r *rand.Rand, nextIP func(local bool) netip.Addr) string {
	newPod := func() proxier.Endpoint {
		local := r.IntN(2) == 0
		node := "node-b"
		if local {
			node = "node-a"
		}
		return proxier.Endpoint{IP: nextIP(local), NodeName: node, IsLocal: local, Ready: r.IntN(4) != 0, Serving: true}
	}
	switch k := r.IntN(10); {
	case k < 3 || !s.exists:
		s.exists = true
		n := 1 + r.IntN(3)
		s.pods = s.pods[:0]
		for range n {
			s.pods = append(s.pods, newPod())
		}
		return "replace all pods"
	case k < 5 && len(s.pods) > 0:
		i := r.IntN(len(s.pods))
		s.pods[i].Ready, s.pods[i].Terminating, s.pods[i].Serving = false, true, r.IntN(2) == 0
		return "one pod terminating"
	case k < 7 && len(s.pods) > 0:
		i := r.IntN(len(s.pods))
		s.pods = slices.Delete(s.pods, i, i+1)
		return "one pod gone"
	case k < 8:
		s.pods = append(s.pods, newPod())
		return "one pod added"
	case k < 9 && len(s.pods) > 0:
		i := r.IntN(len(s.pods))
		s.pods[i].Ready = !s.pods[i].Ready
		s.pods[i].Serving = s.pods[i].Ready
		return "readiness flip"
	default:
		s.exists = false
		return "service deleted"
	}
}

// TestPartialSyncChurn drives one backend through many partial syncs of
// random endpoint churn and checks after each that every service answers
// packets as a backend that wrote the same State in one full sync does.
// Endpoint maps are shared by 16 groups and elements of an unchanged
// range keep their place, so a wrong delta leaves stale endpoints that
// only traffic (or this comparison) shows: the element counts stay equal.
func TestPartialSyncChurn(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	_, node := flowtest.Fixture()
	svcs, nextIP := churnServices(12)
	fake := nftablestest.NewFake()
	b := flowBackend(t, fake, node)
	st := emptyChurnState()
	mustSync(t, b, st, fullDiff())
	for step := range 200 {
		s, what, next, diff := churnStep(r, svcs, nextIP, st)
		mustSync(t, b, next, diff)
		st = next
		ref := nftablestest.NewFake()
		mustSync(t, flowBackend(t, ref, node), st, fullDiff())
		if d := compareFlows(svcs, node.NodeIPs, nftablestest.FlowModel{Fake: ref, NodeIPs: node.NodeIPs}, nftablestest.FlowModel{Fake: fake, NodeIPs: node.NodeIPs}); d != "" {
			t.Fatalf("step %d (%s: %s): partial syncs and a full sync disagree:\n%s", step, s.name, what, d)
		}
	}
}

// churnStep changes a random service and gives the state after it and
// the diff that says so.
func churnStep(r *rand.Rand, svcs []*churnService, nextIP func(bool) netip.Addr, st *proxier.State) (*churnService, string, *proxier.State, *proxier.Diff) {
	s := svcs[r.IntN(len(svcs))]
	what := s.churn(r, nextIP)
	next, diff := cloneState(st), churnDiff()
	s.write(next, diff)
	return s, what, next, diff
}

// churnServices makes n services (every other with a NodePort on its
// UDP port, every third of those eTP=Local, some with affinity) and the
// pod address source: addresses repeat after 250, as a node's IPAM
// reuses them.
func churnServices(n int) ([]*churnService, func(local bool) netip.Addr) {
	var ipSeq int
	nextIP := func(local bool) netip.Addr {
		ipSeq++
		third := byte(2)
		if local {
			third = 1
		}
		return netip.AddrFrom4([4]byte{10, 244, third, byte(2 + ipSeq%250)})
	}
	var svcs []*churnService
	for i := range n {
		s := &churnService{name: fmt.Sprintf("svc%d", i), clusterIP: netip.AddrFrom4([4]byte{10, 96, 1, byte(i + 1)}),
			local: i%3 == 0, affinity: i%7 == 3}
		if i%2 == 0 {
			s.nodePort = uint16(30000 + i)
		}
		svcs = append(svcs, s)
	}
	return svcs, nextIP
}

func churnNode() proxier.NodeInfo {
	_, node := flowtest.Fixture()
	return proxier.NodeInfo{Name: node.NodeName, Addresses: node.NodeIPs}
}

// compareFlows asks both models about every service's cluster IP ports
// (from a pod and from the node) and its NodePort (from outside and from
// the node).
func compareFlows(svcs []*churnService, nodeIPs []netip.Addr, want, got flowtest.Model) string {
	pod, outsider := netip.MustParseAddr("10.244.1.99"), netip.MustParseAddr("203.0.113.7")
	var out string
	for _, s := range svcs {
		var pkts []flowtest.Packet
		for _, p := range churnPorts {
			pkts = append(pkts,
				flowtest.Packet{SrcIP: pod, DstIP: s.clusterIP, DstPort: p.port, Protocol: p.proto},
				flowtest.Packet{SrcIP: nodeIPs[0], SrcLocal: true, DstIP: s.clusterIP, DstPort: p.port, Protocol: p.proto})
		}
		if s.nodePort != 0 {
			pkts = append(pkts,
				flowtest.Packet{SrcIP: outsider, DstIP: nodeIPs[0], DstPort: s.nodePort, Protocol: v1.ProtocolUDP},
				flowtest.Packet{SrcIP: nodeIPs[0], SrcLocal: true, DstIP: nodeIPs[0], DstPort: s.nodePort, Protocol: v1.ProtocolUDP})
		}
		for _, p := range pkts {
			w, werr := want.Flow(p)
			g, gerr := got.Flow(p)
			if werr != nil || gerr != nil {
				out += fmt.Sprintf("%s: errors %v / %v\n", p, werr, gerr)
				continue
			}
			if d := flowtest.Diff(w, g); d != "" {
				out += fmt.Sprintf("%s (-full +partial):\n%s", p, d)
			}
		}
	}
	return out
}
