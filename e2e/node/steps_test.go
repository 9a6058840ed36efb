//go:build node

package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
	svc := c.createWorkload()
	np := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	name := "web." + c.ns + ".svc.cluster.local"
	for _, f := range c.families {
		ip := ipOf(svc.Spec.ClusterIPs, f)
		t.Run("cluster IP "+string(f), func(t *testing.T) { c.checkSpread(t, "http://"+hostPort(ip, "80")+"/hostname") })
		// curl -4 / -6 resolve the name to an A / AAAA record only.
		t.Run("DNS name "+string(f), func(t *testing.T) {
			c.checkSpread(t, curlFamily(f)+" http://"+name+"/hostname")
		})
		t.Run("DNS records "+string(f), func(t *testing.T) { c.checkDNS(t, name, f, ip) })
		for _, n := range c.nodes {
			t.Run("NodePort on "+n.Name+" "+string(f), func(t *testing.T) {
				c.checkSpread(t, "http://"+hostPort(nodeIP(n, f), np)+"/hostname")
			})
		}
	}
	image := os.Getenv("SMOKE_ROLLOUT_IMAGE")
	if image == "" {
		t.Log("SMOKE_ROLLOUT_IMAGE is not set: no rolling update")
		return
	}
	t.Run("rolling update", func(t *testing.T) { c.checkRollingUpdate(t, svc, image) })
}

// createWorkload makes the test namespace, a web pod per node behind
// Service web, and a client pod on the first node, all Ready.
func (c *cluster) createWorkload() *corev1.Service {
	c.createNamespace()
	svc := c.createBackends()
	c.createPod("client", c.nodes[0].Name, nil, "pause")
	c.waitPodsReady()
	return svc
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

func curlFamily(f corev1.IPFamily) string {
	if f == corev1.IPv6Protocol {
		return "-6"
	}
	return "-4"
}

// checkDNS: every address of the cluster DNS Service (each family's, on a
// dual-stack cluster) answers the record of family f for name (A for IPv4,
// AAAA for IPv6) with want, the Service's cluster IP of that family.
func (c *cluster) checkDNS(t *testing.T, name string, f corev1.IPFamily, want string) {
	dns, err := c.cs.CoreV1().Services(systemNS).Get(context.Background(), "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dns.Spec.ClusterIPs) != len(c.families) {
		t.Errorf("Service kube-dns has cluster IPs %v; want one per family %v", dns.Spec.ClusterIPs, c.families)
	}
	rr := map[corev1.IPFamily]string{corev1.IPv4Protocol: "A", corev1.IPv6Protocol: "AAAA"}[f]
	for _, server := range dns.Spec.ClusterIPs {
		out, err := c.exec("client", fmt.Sprintf(`dig +short +time=3 +tries=2 @%s %s %s`, server, name, rr))
		if err != nil || strings.TrimSpace(out) != want {
			t.Errorf("dig @%s %s %s: %q, %v; want %s", server, name, rr, out, err, want)
			continue
		}
		t.Logf("dig @%s %s %s: %s", server, name, rr, want)
	}
}

// checkSpread: 20 requests from the client pod all succeed and reach every
// backend. target is curl's URL, with options before it if need be.
func (c *cluster) checkSpread(t *testing.T, target string) {
	url := target
	out, err := c.exec("client", fmt.Sprintf(
		`for i in $(seq 20); do curl -g -sS -m 3 %s || echo FAIL; echo; done`, target))
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
	`c=$(curl -g -s -o /dev/null -m 2 -w '%{http_code}' "$u"); echo "$(date +%s%3N) $u $c"; done; sleep 0.05; done`

// checkRollingUpdate rolls the DaemonSet to image while one prober per node
// keeps opening connections to the cluster IP and to the other node's
// NodePort, in every family of the cluster; none may fail, and every family
// must have had connections.
func (c *cluster) checkRollingUpdate(t *testing.T, svc *corev1.Service, image string) {
	np := strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
	for i, n := range c.nodes {
		other := c.nodes[(i+1)%len(c.nodes)]
		var targets []string
		for _, f := range c.families {
			targets = append(targets, "http://"+hostPort(ipOf(svc.Spec.ClusterIPs, f), "80")+"/hostname",
				"http://"+hostPort(nodeIP(other, f), np)+"/hostname")
		}
		c.createPod("prober-"+n.Name, n.Name, map[string]string{"TARGETS": strings.Join(targets, " ")},
			"bash", "-c", proberScript)
	}
	c.waitPodsReady()
	time.Sleep(3 * time.Second)
	start := time.Now()
	if err := c.updateImage(image); err != nil {
		t.Fatal(err)
	}
	c.poll("the rolling update", func(ctx context.Context) (bool, error) {
		ds, err := c.cs.AppsV1().DaemonSets(systemNS).Get(ctx, daemonSet, metav1.GetOptions{})
		return err == nil && ds.Spec.Template.Spec.Containers[0].Image == image && dsRolledOut(ds), err
	})
	rolled := time.Since(start)
	time.Sleep(5 * time.Second)
	end := time.Now()
	total, failed := map[corev1.IPFamily]int{}, map[corev1.IPFamily]int{}
	for _, n := range c.nodes {
		logs, err := c.run("-n", c.ns, "logs", "prober-"+n.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range c.families {
			tot, bad := countProbes(logs, start, end, f)
			t.Logf("prober on %s, %s: %d connections during the update, %d failed: %v", n.Name, f, tot, len(bad), bad)
			total[f], failed[f] = total[f]+tot, failed[f]+len(bad)
		}
	}
	for _, f := range c.families {
		t.Logf("rolling update to %s: %.1fs; %s: %d connections, %d failed", image, rolled.Seconds(), f, total[f], failed[f])
		if total[f] == 0 || failed[f] != 0 {
			t.Errorf("%s: %d of %d connections failed during the rolling update", f, failed[f], total[f])
		}
	}
	c.checkNewPods(t, image)
}

// countProbes counts the prober lines of family fam (by the URL's host)
// logged between start and end and returns the failed ones.
func countProbes(logs string, start, end time.Time, fam corev1.IPFamily) (int, []string) {
	total, failed := 0, []string{}
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || urlFamily(f[1]) != fam {
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

// urlFamily: the family of an http://HOST[:PORT]/... URL's literal address.
func urlFamily(u string) corev1.IPFamily {
	if strings.HasPrefix(strings.TrimPrefix(u, "http://"), "[") {
		return corev1.IPv6Protocol
	}
	return corev1.IPv4Protocol
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

// updateImage starts the rolling update to image: `kubectl set image`, or
// with SMOKE_HELM (the cluster was installed with the chart) `helm
// upgrade` of the release to the image's tag, values otherwise kept.
func (c *cluster) updateImage(image string) error {
	helm := os.Getenv("SMOKE_HELM")
	if helm == "" {
		_, err := c.run("-n", systemNS, "set", "image", "ds/"+daemonSet, "switchyard="+image)
		return err
	}
	tag := image[strings.LastIndex(image, ":")+1:]
	cmd := exec.Command(helm, "--kubeconfig", os.Getenv("SMOKE_KUBECONFIG"), "upgrade", "switchyard", os.Getenv("SMOKE_HELM_CHART"),
		"--namespace", systemNS, "--reuse-values", "--set-string", "image.tag="+tag)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("helm upgrade: %w: %s", err, out)
	}
	return nil
}
