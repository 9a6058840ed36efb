package app

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	kubeclientset "github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
)

var cmpAddrs = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func nodeWithAddresses(addrs ...v1.NodeAddress) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}, Status: v1.NodeStatus{Addresses: addrs}}
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// TestNodeHostIPs: the first InternalIP (else ExternalIP) is primary,
// then the first of the other family, as the kubelet orders them.
func TestNodeHostIPs(t *testing.T) {
	internal := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeInternalIP, Address: a} }
	external := func(a string) v1.NodeAddress { return v1.NodeAddress{Type: v1.NodeExternalIP, Address: a} }
	for name, tc := range map[string]struct {
		node *v1.Node
		want []netip.Addr
	}{
		"none":         {nodeWithAddresses(v1.NodeAddress{Type: v1.NodeHostName, Address: "node-a"}), nil},
		"ipv4 only":    {nodeWithAddresses(internal("192.0.2.10"), internal("192.0.2.11")), addrs("192.0.2.10")},
		"ipv6 only":    {nodeWithAddresses(internal("2001:db8::10")), addrs("2001:db8::10")},
		"dual":         {nodeWithAddresses(internal("192.0.2.10"), internal("192.0.2.11"), internal("2001:db8::10")), addrs("192.0.2.10", "2001:db8::10")},
		"ipv6 primary": {nodeWithAddresses(internal("2001:db8::10"), internal("192.0.2.10")), addrs("2001:db8::10", "192.0.2.10")},
		"internal first": {nodeWithAddresses(external("203.0.113.1"), internal("2001:db8::10")),
			addrs("2001:db8::10", "203.0.113.1")},
		"garbage skipped": {nodeWithAddresses(internal("not-an-ip"), internal("fe80::1%eth0"), external("192.0.2.10")), addrs("192.0.2.10")},
	} {
		if d := cmp.Diff(tc.want, nodeHostIPs(tc.node), cmpAddrs); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}

func TestAwaitNodeIPs(t *testing.T) {
	node := nodeWithAddresses(v1.NodeAddress{Type: v1.NodeInternalIP, Address: "fd00::10"})
	got := awaitNodeIPs(context.Background(), kubeclientset.New(fake.NewClientset(node)), "node-a", time.Millisecond, time.Second)
	if d := cmp.Diff(addrs("fd00::10"), got, cmpAddrs); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// No node: the daemon goes on without IPs after the wait.
	if got := awaitNodeIPs(context.Background(), kubeclientset.New(fake.NewClientset()), "node-a", time.Millisecond, 20*time.Millisecond); got != nil {
		t.Errorf("no node: %v", got)
	}
}

// TestAwaitNodeIPsDenied: without RBAC on nodes there is nothing to wait
// for; the daemon goes on at once (and says why).
func TestAwaitNodeIPsDenied(t *testing.T) {
	cs := fake.NewClientset()
	gets := 0
	cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "node-a", errors.New("no RBAC"))
	})
	if got := awaitNodeIPs(context.Background(), kubeclientset.New(cs), "node-a", time.Millisecond, time.Minute); got != nil {
		t.Errorf("denied: %v", got)
	}
	if gets != 1 {
		t.Errorf("asked %d times for a node it may not read, want once", gets)
	}
}

func TestPrimaryNodeIPsBindAddress(t *testing.T) {
	node := addrs("192.0.2.10", "2001:db8::10")
	for name, tc := range map[string]struct {
		bind netip.Addr
		want []netip.Addr
	}{
		"unset":        {netip.Addr{}, node},
		"unspecified":  {netip.MustParseAddr("::"), node},
		"ipv6 primary": {netip.MustParseAddr("2001:db8::99"), addrs("2001:db8::99", "192.0.2.10")},
		"ipv4":         {netip.MustParseAddr("192.0.2.99"), addrs("192.0.2.99", "2001:db8::10")},
	} {
		if d := cmp.Diff(tc.want, primaryNodeIPs(node, tc.bind), cmpAddrs); d != "" {
			t.Errorf("%s (-want +got):\n%s", name, d)
		}
	}
}

func TestResolveNodePortAddressesPrimary(t *testing.T) {
	o := &Options{NodePortPrimary: true}
	if err := resolveNodePortAddresses(o, addrs("192.0.2.10", "2001:db8::10")); err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("2001:db8::10/128")}
	if d := cmp.Diff(want, o.NodePortAddresses, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("NodePortAddresses (-want +got):\n%s", d)
	}
	// Without a node IP the restriction cannot be made.
	if err := resolveNodePortAddresses(&Options{NodePortPrimary: true}, nil); err == nil {
		t.Error("no node IPs: want an error")
	}
}

func TestResolveNodePortAddressesLeavesCIDRsAlone(t *testing.T) {
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	o := &Options{NodePortAddresses: cidrs}
	if err := resolveNodePortAddresses(o, addrs("192.0.2.10")); err != nil {
		t.Fatal(err)
	}
	if len(o.NodePortAddresses) != 1 || o.NodePortAddresses[0] != cidrs[0] {
		t.Errorf("NodePortAddresses changed: %v", o.NodePortAddresses)
	}
}
