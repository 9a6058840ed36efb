//go:build node

package node

import (
	"context"
	"fmt"
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
	return c
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

func nodeIP(n corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
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
// and returns the Service.
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
	svc, err := c.cs.CoreV1().Services(c.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: labels,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
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
