package main

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/proxier"
)

// buildState makes n ClusterIP TCP service ports with eps ready endpoints
// each, every tenth one also a NodePort: the shape of the PERF-FACTS
// payloads (per service a KUBE-SERVICES rule and a KUBE-SVC chain, per
// endpoint a KUBE-SEP chain).
func buildState(n, eps int) *proxier.State {
	st := &proxier.State{
		Services:  make(map[proxier.ServicePortName]*proxier.ServicePort, n),
		Endpoints: make(map[proxier.ServicePortName][]proxier.Endpoint, n),
		Node:      proxier.NodeInfo{Name: "bench-node", Addresses: []netip.Addr{netip.AddrFrom4([4]byte{192, 168, 1, 10})}},
	}
	for i := range n {
		name := serviceName(i)
		sp := &proxier.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: 80,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96 + byte(i>>16), byte(i >> 8), byte(i)})}}
		if i%10 == 0 {
			sp.NodePort = uint16(30000 + i%2768)
		}
		st.Services[name] = sp
		out := make([]proxier.Endpoint, 0, eps)
		for j := range eps {
			k := i*eps + j
			out = append(out, endpoint(netip.AddrFrom4([4]byte{10, byte(64 + k>>16), byte(k >> 8), byte(k)})))
		}
		st.Endpoints[name] = out
	}
	return st
}

func serviceName(i int) proxier.ServicePortName {
	return proxier.ServicePortName{
		NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i)},
		Port:           "http", Protocol: v1.ProtocolTCP,
	}
}

func endpoint(ip netip.Addr) proxier.Endpoint {
	return proxier.Endpoint{IP: ip, Port: 8080, Ready: true, Serving: true, NodeName: "other-node"}
}

// changeOneEndpoint returns a new State in which service i's last
// endpoint moved to a new address (gen makes it unique), and the Diff a
// proxier would hand the backend for it. st is not modified.
func changeOneEndpoint(st *proxier.State, i, gen int) (*proxier.State, *proxier.Diff) {
	name := serviceName(i)
	next := *st
	next.Endpoints = maps.Clone(st.Endpoints)
	eps := slices.Clone(st.Endpoints[name])
	// 10.200/16 sorts after every original address: the list stays sorted.
	eps[len(eps)-1] = endpoint(netip.AddrFrom4([4]byte{10, 200, byte(gen >> 8), byte(gen)}))
	next.Endpoints[name] = eps
	return &next, &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{name: {}}}
}
