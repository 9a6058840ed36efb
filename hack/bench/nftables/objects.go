package main

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/switchyard-proxy/switchyard/proxier"
)

const (
	benchNS  = "bench"
	nodeName = "node-a"
	podCIDR  = "10.0.0.0/8"
)

func clusterIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{172, 16 + byte(i>>16), byte(i >> 8), byte(i)})
}

// endpointIP is endpoint j of service i in generation gen.
func endpointIP(i, j, gen int) netip.Addr {
	k := (i*32+j)*4 + gen%4
	return netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)})
}

func serviceObj(i int) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: fmt.Sprintf("svc-%d", i)},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP(i).String(), ClusterIPs: []string{clusterIP(i).String()},
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
}

func sliceObj(i, eps int, gens []int) *discoveryv1.EndpointSlice {
	ready, port, proto, node := true, int32(8080), corev1.ProtocolTCP, "node-b"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNS, Name: fmt.Sprintf("svc-%d-abcde", i),
			Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc-%d", i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &proto}},
	}
	for j := 0; j < eps; j++ {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{endpointIP(i, j, gens[j]).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &ready},
			NodeName:   &node,
		})
	}
	return s
}

func nodeObj() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.0.10"}}}}
}

// objects are n services with eps endpoints each, and this node.
func objects(n, eps int) []runtime.Object {
	out := []runtime.Object{nodeObj()}
	gens := make([]int, eps)
	for i := 0; i < n; i++ {
		out = append(out, serviceObj(i), sliceObj(i, eps, gens))
	}
	return out
}

func portName(i int) proxier.ServicePortName {
	return proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: benchNS, Name: fmt.Sprintf("svc-%d", i)}, Protocol: corev1.ProtocolTCP}
}

// state is what the proxier makes of objects(n, eps): the floor renders
// the same ruleset from it.
func state(n, eps int) *proxier.State {
	st := &proxier.State{Services: map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: nodeName, Addresses: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}}
	for i := 0; i < n; i++ {
		name := portName(i)
		st.Services[name] = &proxier.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: 80, ClusterIPs: []netip.Addr{clusterIP(i)}}
		for j := 0; j < eps; j++ {
			st.Endpoints[name] = append(st.Endpoints[name], proxier.Endpoint{IP: endpointIP(i, j, 0), Port: 8080,
				Ready: true, Serving: true, NodeName: "node-b"})
		}
	}
	return st
}
