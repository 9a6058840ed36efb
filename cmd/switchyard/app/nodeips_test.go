package app

import (
	"context"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	kubeclientset "github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
)

func TestResolveNodePortAddressesPrimary(t *testing.T) {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeHostName, Address: "node-a"},
			{Type: v1.NodeInternalIP, Address: "192.0.2.10"},
			{Type: v1.NodeInternalIP, Address: "2001:db8::10"},
		}},
	}
	client := kubeclientset.New(fake.NewClientset(node))
	o := &Options{NodePortPrimary: true}
	if err := resolveNodePortAddresses(context.Background(), o, client, "node-a"); err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.0.2.10/32"), netip.MustParsePrefix("2001:db8::10/128")}
	if d := cmp.Diff(want, o.NodePortAddresses, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("NodePortAddresses (-want +got):\n%s", d)
	}
}

func TestResolveNodePortAddressesLeavesCIDRsAlone(t *testing.T) {
	cidrs := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	o := &Options{NodePortAddresses: cidrs}
	// No client calls are made when "primary" was not asked for.
	if err := resolveNodePortAddresses(context.Background(), o, nil, "node-a"); err != nil {
		t.Fatal(err)
	}
	if len(o.NodePortAddresses) != 1 || o.NodePortAddresses[0] != cidrs[0] {
		t.Errorf("NodePortAddresses changed: %v", o.NodePortAddresses)
	}
}
