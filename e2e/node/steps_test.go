//go:build node

package node

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeSmoke(t *testing.T) {
	c := newCluster(t)
	t.Run("daemonset", c.checkDaemonSet)
	if t.Failed() {
		return
	}
	c.createNamespace()
	svc := c.createBackends()
	c.createPod("client", c.nodes[0].Name, nil, "pause")
	c.waitPodsReady()
	np := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	t.Run("cluster IP", func(t *testing.T) { c.checkSpread(t, "http://"+svc.Spec.ClusterIP+"/hostname") })
	t.Run("DNS name", func(t *testing.T) {
		c.checkSpread(t, "http://web."+c.ns+".svc.cluster.local/hostname")
	})
	for _, n := range c.nodes {
		t.Run("NodePort on "+n.Name, func(t *testing.T) { c.checkSpread(t, "http://"+nodeIP(n)+":"+np+"/hostname") })
	}
	image := os.Getenv("SMOKE_ROLLOUT_IMAGE")
	if image == "" {
		t.Log("SMOKE_ROLLOUT_IMAGE is not set: no rolling update")
		return
	}
	t.Run("rolling update", func(t *testing.T) { c.checkRollingUpdate(t, svc, image) })
}

// checkDaemonSet: every node runs a Ready switchyard pod that never
// restarted, answers /livez on 10256 and writes its start line to its log.
func (c *cluster) checkDaemonSet(t *testing.T) {
	ctx := context.Background()
	c.poll("the DaemonSet to roll out", func(ctx context.Context) (bool, error) {
		ds, err := c.cs.AppsV1().DaemonSets(systemNS).Get(ctx, daemonSet, metav1.GetOptions{})
		return err == nil && dsRolledOut(ds) && int(ds.Status.NumberReady) == len(c.nodes), err
	})
	pods, err := c.daemonPods(ctx)
	if err != nil || len(pods) != len(c.nodes) {
		t.Fatalf("switchyard pods: %d, %v; want one per node (%d)", len(pods), err, len(c.nodes))
	}
	for _, p := range pods {
		if n := p.Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Errorf("pod %s on %s restarted %d times", p.Name, p.Spec.NodeName, n)
		}
		// The apiserver's node proxy reaches the probe's port on the node.
		body, err := c.cs.CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes/" + p.Spec.NodeName + ":10256/proxy/livez").DoRaw(ctx)
		if err != nil {
			t.Errorf("GET %s:10256/livez: %v (%s)", p.Spec.NodeName, err, body)
		}
		logs, err := c.cs.CoreV1().Pods(systemNS).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		start := "Starting switchyard"
		if err != nil || !strings.Contains(string(logs), start) {
			t.Errorf("logs of %s: %v; no start line in %q", p.Name, err, tail(string(logs), 400))
		}
		// The mode comes from the ConfigMap: the daemon must say it runs in it.
		if mode := os.Getenv("SMOKE_MODE"); mode != "" && !strings.Contains(string(logs), `mode="`+mode+`"`) {
			t.Errorf("logs of %s do not show mode=%q: %q", p.Name, mode, tail(string(logs), 400))
		}
		t.Logf("%s on %s: Ready, /livez answers, logs readable", p.Name, p.Spec.NodeName)
	}
}

// checkSpread: 20 requests from the client pod all succeed and reach every
// backend.
func (c *cluster) checkSpread(t *testing.T, url string) {
	out, err := c.exec("client", fmt.Sprintf(
		`for i in $(seq 20); do curl -sS -m 3 %s || echo FAIL; echo; done`, url))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	seen := map[string]int{}
	for _, l := range strings.Fields(out) {
		seen[l]++
	}
	if seen["FAIL"] > 0 || len(seen) != len(c.nodes) {
		t.Errorf("%s: answers %v; want 20 successes spread over %d backends", url, seen, len(c.nodes))
	}
	t.Logf("%s: %v", url, seen)
}

// proberScript requests TARGETS (space-separated URLs) in turn, a new
// connection each time, and logs "<unix ms> <url> <http code>".
const proberScript = `while true; do for u in $TARGETS; do ` +
	`c=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$u"); echo "$(date +%s%3N) $u $c"; done; sleep 0.05; done`

// checkRollingUpdate rolls the DaemonSet to image while one prober per node
// keeps opening connections to the cluster IP and to the other node's
// NodePort; none may fail.
func (c *cluster) checkRollingUpdate(t *testing.T, svc *corev1.Service, image string) {
	np := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	for i, n := range c.nodes {
		other := c.nodes[(i+1)%len(c.nodes)]
		targets := "http://" + svc.Spec.ClusterIP + "/hostname http://" + nodeIP(other) + ":" + np + "/hostname"
		c.createPod("prober-"+n.Name, n.Name, map[string]string{"TARGETS": targets}, "bash", "-c", proberScript)
	}
	c.waitPodsReady()
	time.Sleep(3 * time.Second)
	start := time.Now()
	if _, err := c.run("-n", systemNS, "set", "image", "ds/"+daemonSet, "switchyard="+image); err != nil {
		t.Fatal(err)
	}
	c.poll("the rolling update", func(ctx context.Context) (bool, error) {
		ds, err := c.cs.AppsV1().DaemonSets(systemNS).Get(ctx, daemonSet, metav1.GetOptions{})
		return err == nil && ds.Spec.Template.Spec.Containers[0].Image == image && dsRolledOut(ds), err
	})
	rolled := time.Since(start)
	time.Sleep(5 * time.Second)
	end := time.Now()
	total, failed := 0, 0
	for _, n := range c.nodes {
		logs, err := c.run("-n", c.ns, "logs", "prober-"+n.Name)
		if err != nil {
			t.Fatal(err)
		}
		tot, bad := countProbes(logs, start, end)
		t.Logf("prober on %s: %d connections during the update, %d failed: %v", n.Name, tot, len(bad), bad)
		total, failed = total+tot, failed+len(bad)
	}
	t.Logf("rolling update to %s: %.1fs; %d connections, %d failed", image, rolled.Seconds(), total, failed)
	if total == 0 || failed != 0 {
		t.Errorf("%d of %d connections failed during the rolling update", failed, total)
	}
	c.checkNewPods(t, image)
}

// countProbes counts the prober lines logged between start and end and
// returns the failed ones.
func countProbes(logs string, start, end time.Time) (int, []string) {
	total, failed := 0, []string{}
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		ms, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || ms < start.UnixMilli() || ms > end.UnixMilli() {
			continue
		}
		total++
		if f[2] != "200" {
			failed = append(failed, l)
		}
	}
	return total, failed
}

func (c *cluster) checkNewPods(t *testing.T, image string) {
	pods, err := c.daemonPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var on []string
	for _, p := range pods {
		if p.Spec.Containers[0].Image != image || !podReady(p) {
			t.Errorf("pod %s runs %s (Ready %v), want %s", p.Name, p.Spec.Containers[0].Image, podReady(p), image)
		}
		on = append(on, p.Spec.NodeName)
	}
	sort.Strings(on)
	t.Logf("%s runs on %v", image, on)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
