package app

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	kubeclientset "github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestWaitForPodCIDRs: NodeCIDR mode waits, as kube-proxy does, for the
// Node to get spec.podCIDRs, and fails naming the node when it never
// does (or never appears).
func TestWaitForPodCIDRs(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	client := kubeclientset.New(fake.NewClientset(node))
	go func() {
		time.Sleep(30 * time.Millisecond)
		n := node.DeepCopy()
		n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:10:244:1::/64"}
		_, _ = client.CS.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{})
	}()
	got, err := waitForPodCIDRs(context.Background(), client, "node-a", 5*time.Millisecond, 5*time.Second)
	want := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("waitForPodCIDRs = %v, %v; want %v", got, err, want)
	}

	bare := kubeclientset.New(fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}))
	if _, err := waitForPodCIDRs(context.Background(), bare, "node-b", 5*time.Millisecond, 30*time.Millisecond); err == nil ||
		!strings.Contains(err.Error(), `timeout waiting for PodCIDR allocation on node "node-b"`) {
		t.Errorf("no pod CIDR: err = %v", err)
	}
	if _, err := waitForPodCIDRs(context.Background(), bare, "node-c", 5*time.Millisecond, 30*time.Millisecond); err == nil ||
		!strings.Contains(err.Error(), `timeout waiting for node "node-c" to exist`) {
		t.Errorf("no node: err = %v", err)
	}
}

// TestAwaitPodCIDRsOnlyInNodeCIDRMode: other modes do not read the Node;
// NodeCIDR records the pod CIDRs.
func TestAwaitPodCIDRsOnlyInNodeCIDRMode(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec: v1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}}}
	o := &Options{LocalDetector: proxier.DetectByInterfacePrefix("cali")}
	if err := awaitPodCIDRs(context.Background(), o, kubeclientset.New(fake.NewClientset()), "node-a"); err != nil || o.NodePodCIDRs != nil {
		t.Fatalf("InterfaceNamePrefix: %v, %v", err, o.NodePodCIDRs)
	}
	o = &Options{LocalDetector: proxier.DetectByNodeCIDR()}
	if err := awaitPodCIDRs(context.Background(), o, kubeclientset.New(fake.NewClientset(node)), "node-a"); err != nil {
		t.Fatal(err)
	}
	if len(o.NodePodCIDRs) != 2 {
		t.Errorf("NodeCIDR: pod CIDRs %v", o.NodePodCIDRs)
	}
}
