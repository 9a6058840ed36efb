//go:build node

package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	agnhost     = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	systemNS    = "kube-system"
	daemonSet   = "switchyard"
	waitTimeout = 3 * time.Minute
)

// cluster is what every step of the smoke test works with.
type cluster struct {
	t       *testing.T
	cs      kubernetes.Interface
	kubectl []string // the kubectl command with its --kubeconfig
	ns      string
	nodes   []corev1.Node
	// families are the cluster's IP families, primary first (from the
	// nodes' pod CIDRs); on a dual-stack cluster every check runs in both.
	families []corev1.IPFamily
}

func newCluster(t *testing.T) *cluster {
	kc := os.Getenv("SMOKE_KUBECONFIG")
	if kc == "" {
		t.Skip("SMOKE_KUBECONFIG is not set (run hack/cluster/smoke.sh)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubectl := os.Getenv("SMOKE_KUBECTL")
	if kubectl == "" {
		kubectl = "kubectl"
	}
	c := &cluster{t: t, cs: cs, kubectl: []string{kubectl, "--kubeconfig", kc}}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("list nodes: %v (%d nodes)", err, len(nodes.Items))
	}
	c.nodes = nodes.Items
	c.families = clusterFamilies(t, c.nodes)
	return c
}

// clusterFamilies: the IP families of the nodes' pod CIDRs (every node must
// have the same, primary first) and their InternalIPs. SMOKE_FAMILY (ipv4,
// ipv6 or dual), when set, is the shape the cluster must have.
func clusterFamilies(t *testing.T, nodes []corev1.Node) []corev1.IPFamily {
	var fams []corev1.IPFamily
	for i, n := range nodes {
		var got []corev1.IPFamily
		for _, cidr := range n.Spec.PodCIDRs {
			got = append(got, familyOf(strings.SplitN(cidr, "/", 2)[0]))
		}
		if i == 0 {
			fams = got
		} else if fmt.Sprint(got) != fmt.Sprint(fams) {
			t.Fatalf("node %s has pod CIDRs %v, node %s %v", n.Name, n.Spec.PodCIDRs, nodes[0].Name, nodes[0].Spec.PodCIDRs)
		}
		for _, f := range got {
			if nodeIP(n, f) == "" {
				t.Fatalf("node %s has no %s InternalIP: %v", n.Name, f, n.Status.Addresses)
			}
		}
	}
	if len(fams) == 0 {
		t.Fatalf("node %s has no pod CIDRs", nodes[0].Name)
	}
	want := map[string]string{"ipv4": "[IPv4]", "ipv6": "[IPv6]", "dual": "[IPv4 IPv6]"}
	if f := os.Getenv("SMOKE_FAMILY"); f != "" && want[f] != fmt.Sprint(fams) {
		t.Fatalf("SMOKE_FAMILY=%s but the nodes' pod CIDRs are %v (%v)", f, nodes[0].Spec.PodCIDRs, fams)
	}
	return fams
}

func familyOf(ip string) corev1.IPFamily {
	if strings.Contains(ip, ":") {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
}

// hostPort joins an address and a port, with brackets around IPv6.
func hostPort(ip, port string) string { return net.JoinHostPort(ip, port) }

// ipOf returns the address of family f among ips ("" if none).
func ipOf(ips []string, f corev1.IPFamily) string {
	for _, ip := range ips {
		if familyOf(ip) == f {
			return ip
		}
	}
	return ""
}

// run runs kubectl with args and returns its standard output.
func (c *cluster) run(args ...string) (string, error) {
	cmd := exec.Command(c.kubectl[0], append(c.kubectl[1:], args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// exec runs a shell command in a pod of the test namespace.
func (c *cluster) exec(pod, script string) (string, error) {
	return c.run("-n", c.ns, "exec", pod, "--", "bash", "-c", script)
}

func (c *cluster) poll(desc string, cond func(context.Context) (bool, error)) {
	c.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, waitTimeout, true, cond)
	if err != nil {
		c.t.Fatalf("waiting for %s: %v", desc, err)
	}
}

// nodeIP: the node's InternalIP of family f.
func nodeIP(n corev1.Node, f corev1.IPFamily) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && familyOf(a.Address) == f {
			return a.Address
		}
	}
	return ""
}

// dsRolledOut reports whether every node runs an available pod of the
// DaemonSet's current template.
func dsRolledOut(ds *appsv1.DaemonSet) bool {
	s := ds.Status
	return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled > 0 &&
		s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
		s.NumberAvailable == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled
}

func (c *cluster) daemonPods(ctx context.Context) ([]corev1.Pod, error) {
	pods, err := c.cs.CoreV1().Pods(systemNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=switchyard"})
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live, nil
}

func podReady(p corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podSpec(node string, cmd ...string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeName:                      node,
		TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{
			Name: "c", Image: agnhost, ImagePullPolicy: corev1.PullNever, Args: cmd,
		}},
	}
}

func (c *cluster) createNamespace() {
	ctx := context.Background()
	ns, err := c.cs.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "smoke-"}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.ns = ns.Name
	c.t.Cleanup(func() {
		_ = c.cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
}

// createBackends starts one netexec pod per node behind a NodePort Service
// (dual-stack on a dual-stack cluster) and returns the Service.
func (c *cluster) createBackends() *corev1.Service {
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	for _, n := range c.nodes {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-" + n.Name, Labels: labels},
			Spec:       podSpec(n.Name, "netexec", "--http-port=8080"),
		}
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1}
		if _, err := c.cs.CoreV1().Pods(c.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	spec := corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: labels,
		Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}
	if len(c.families) > 1 {
		policy := corev1.IPFamilyPolicyRequireDualStack
		spec.IPFamilyPolicy, spec.IPFamilies = &policy, c.families
	}
	svc, err := c.cs.CoreV1().Services(c.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, f := range c.families {
		if ipOf(svc.Spec.ClusterIPs, f) == "" {
			c.t.Fatalf("Service web has cluster IPs %v: none of %s", svc.Spec.ClusterIPs, f)
		}
	}
	return svc
}

func (c *cluster) createPod(name, node string, env map[string]string, cmd ...string) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: podSpec(node, cmd...)}
	for k, v := range env {
		pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: k, Value: v})
	}
	if len(cmd) > 0 && cmd[0] == "bash" {
		pod.Spec.Containers[0].Command, pod.Spec.Containers[0].Args = cmd, nil
	}
	if _, err := c.cs.CoreV1().Pods(c.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) waitPodsReady() {
	c.poll("the test pods to be Ready", func(ctx context.Context) (bool, error) {
		pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if !podReady(p) {
				return false, nil
			}
		}
		return len(pods.Items) > 0, nil
	})
}
