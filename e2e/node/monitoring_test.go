//go:build node

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// monitoringDir holds deploy/monitoring, from this package's directory.
const monitoringDir = "../../deploy/monitoring"

// promAddr is where the test's Prometheus serves, inside the control
// plane's network namespace.
const promAddr = "127.0.0.1:19090"

// alertFor replaces every alert's `for` so the test sees alerts fire in
// seconds instead of the 5-15 minutes the rules wait in production.
const alertFor = "10s"

// mixinQueries are the kubernetes-mixin kube-proxy dashboard's panel
// queries (dashboards/proxy.libsonnet) and its instance variable, with its
// single-cluster settings: clusterLabel "cluster" matched against the
// empty $cluster, kubeProxySelector job="kube-proxy", $instance ".*". Test
// data: the expressions an operator's dashboard sends.
var mixinQueries = map[string]string{
	"Up":                        `sum(up{cluster="", job="kube-proxy"})`,
	"Rules Sync Rate":           `sum(rate(kubeproxy_sync_proxy_rules_duration_seconds_count{cluster="", job="kube-proxy", instance=~".*"}[5m]))`,
	"Rule Sync Latency 99th":    `histogram_quantile(0.99,rate(kubeproxy_sync_proxy_rules_duration_seconds_bucket{cluster="", job="kube-proxy", instance=~".*"}[5m]))`,
	"Network Programming Rate":  `sum(rate(kubeproxy_network_programming_duration_seconds_count{cluster="", job="kube-proxy", instance=~".*"}[5m]))`,
	"Network Programming 99th":  `histogram_quantile(0.99, sum(rate(kubeproxy_network_programming_duration_seconds_bucket{cluster="", job="kube-proxy", instance=~".*"}[5m])) by (instance, le))`,
	"Kube API Request Rate 2xx": `sum(rate(rest_client_requests_total{cluster="", job="kube-proxy", instance=~".*",code=~"2.."}[5m]))`,
	"Post Request Latency 99th": `histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{cluster="", job="kube-proxy",instance=~".*",verb="POST"}[5m])) by (verb, url, le))`,
	"Get Request Latency 99th":  `histogram_quantile(0.99, sum(rate(rest_client_request_duration_seconds_bucket{cluster="", job="kube-proxy", instance=~".*", verb="GET"}[5m])) by (verb, url, le))`,
	"Memory":                    `process_resident_memory_bytes{cluster="", job="kube-proxy",instance=~".*"}`,
	"CPU usage":                 `rate(process_cpu_seconds_total{cluster="", job="kube-proxy",instance=~".*"}[5m])`,
	"Goroutines":                `go_goroutines{cluster="", job="kube-proxy",instance=~".*"}`,
	"variable instance":         `kubeproxy_network_programming_duration_seconds_bucket{cluster="", job="kube-proxy"}`,
}

// mixinKubeProxyDown is the mixin's alert on a cluster without kube-proxy
// (absent_alerts), loaded beside switchyard's.
var mixinKubeProxyDown = map[string]any{"alert": "KubeProxyDown", "expr": `absent(up{job="kube-proxy"} == 1)`, "for": alertFor}

// TestNodeMonitoring: Prometheus (Debian's), in the control plane's
// network namespace, scrapes every switchyard pod found through the
// chart's metrics Service as a ServiceMonitor would (job "kube-proxy",
// from its k8s-app label) and loads
// switchyard's alerts. After traffic, churn and one of each condition the
// alerts watch, every query of the kubernetes-mixin kube-proxy dashboard
// and of switchyard's dashboard returns data, each alert fires when its
// condition is produced, and the dashboard's panels are drawn to a PNG.
func TestNodeMonitoring(t *testing.T) {
	cpNS := os.Getenv("MON_CP_NETNS")
	if cpNS == "" {
		t.Skip("MON_CP_NETNS is not set (run hack/cluster/monitoring.sh)")
	}
	c := newCluster(t)
	t.Run("daemonset", c.checkDaemonSet)
	if t.Failed() {
		return
	}
	svc := c.createWorkload()
	prom := c.startPrometheus(t, cpNS)
	c.waitTargets(t, prom)
	start := time.Now()
	c.produceConditions(t, svc)
	queries := dashboardQueries(t)
	withData := c.checkQueries(t, prom, queries)
	fired := c.checkAlerts(t, prom, "SwitchyardSyncFailing", "SwitchyardNetworkProgrammingSlow", "SwitchyardRulesRepaired", "SwitchyardObjectsRejected")
	if png := os.Getenv("MON_PNG"); png != "" {
		renderDashboard(t, prom, png, start.Add(-2*time.Minute), time.Now())
	}
	c.rejectConfig(t)
	fired += c.checkAlerts(t, prom, "SwitchyardTargetDown")
	c.removeProxies(t)
	fired += c.checkAlerts(t, prom, "SwitchyardDown", "KubeProxyDown")
	fmt.Printf("monitoring: queries=%d with_data=%d alerts=7 fired=%d\n", len(queries), withData, fired)
}

// startPrometheus runs Prometheus in the control plane's namespace (it
// reaches every node's metrics address), with its targets kept by
// watchTargets.
func (c *cluster) startPrometheus(t *testing.T, ns string) *framework.Prometheus {
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.json")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c.writeTargets(t, targets)
	go c.watchTargets(ctx, t, targets)
	rules := filepath.Join(dir, "rules.yaml")
	writeRules(t, rules)
	return framework.StartPrometheusConfig(t, ns, promAddr, promConfig(targets, rules))
}

// promConfig scrapes the targets file. (Debian's Prometheus is built
// without Kubernetes discovery: the test discovers as the chart's
// ServiceMonitor would, from the metrics Service's EndpointSlices.)
func promConfig(targets, rules string) string {
	return fmt.Sprintf(`global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files: [%q]
scrape_configs:
- job_name: switchyard-servicemonitor
  file_sd_configs:
  - files: [%q]
    refresh_interval: 5s
`, rules, targets)
}

// watchTargets rewrites the targets file every 3 s until ctx ends.
func (c *cluster) watchTargets(ctx context.Context, t *testing.T, path string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(3 * time.Second):
			c.writeTargets(t, path)
		}
	}
}

// writeTargets writes what a ServiceMonitor over Service switchyard-metrics
// (port "metrics", jobLabel k8s-app) scrapes: every endpoint, ready or not
// (a crash-looping pod is scraped, and is down), job from the Service's
// k8s-app label, node from the endpoint. Errors leave the file as it was.
func (c *cluster) writeTargets(t *testing.T, path string) {
	ctx := context.Background()
	svc, err := c.cs.CoreV1().Services(systemNS).Get(ctx, "switchyard-metrics", metav1.GetOptions{})
	if err != nil {
		t.Logf("targets: %v", err)
		return
	}
	eps, err := c.cs.DiscoveryV1().EndpointSlices(systemNS).List(ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=switchyard-metrics"})
	if err != nil {
		t.Logf("targets: %v", err)
		return
	}
	type group struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	groups := []group{}
	for _, sl := range eps.Items {
		for _, p := range sl.Ports {
			if p.Name == nil || *p.Name != "metrics" || p.Port == nil {
				continue
			}
			for _, e := range sl.Endpoints {
				node := ""
				if e.NodeName != nil {
					node = *e.NodeName
				}
				groups = append(groups, group{Targets: []string{net.JoinHostPort(e.Addresses[0], fmt.Sprint(*p.Port))},
					Labels: map[string]string{"job": svc.Labels["k8s-app"], "node": node}})
			}
		}
	}
	data, _ := json.Marshal(groups)
	if err := os.WriteFile(path+".tmp", data, 0o644); err == nil {
		_ = os.Rename(path+".tmp", path)
	}
}

// writeRules writes switchyard's alerts (the PrometheusRule's spec) with
// short `for`s, and the mixin's KubeProxyDown.
func writeRules(t *testing.T, path string) {
	data, err := os.ReadFile(filepath.Join(monitoringDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Spec struct {
			Groups []struct {
				Name  string           `json:"name"`
				Rules []map[string]any `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatal(err)
	}
	g := &pr.Spec.Groups[0]
	for _, r := range g.Rules {
		r["for"] = alertFor
	}
	g.Rules = append(g.Rules, mixinKubeProxyDown)
	out, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitTargets waits until Prometheus scrapes one switchyard per node.
func (c *cluster) waitTargets(t *testing.T, p *framework.Prometheus) {
	c.poll("Prometheus to scrape every switchyard", func(ctx context.Context) (bool, error) {
		s, err := p.Query(ctx, `up{job="kube-proxy"} == 1`)
		return err == nil && len(s) == len(c.nodes), nil
	})
	t.Logf("Prometheus scrapes %d switchyard pods as job kube-proxy", len(c.nodes))
}

// produceConditions drives traffic and churn, and produces what each
// alert watches: a slow network programming (an EndpointSlice whose
// trigger time is 90 s old), a rejected object (a slice without a Service
// name), a repair (a chain flushed behind the first node's back) and a
// failed sync (a foreign jump into a Service's chain on the second node,
// then the Service deleted).
func (c *cluster) produceConditions(t *testing.T, web *corev1.Service) {
	ctx := context.Background()
	ip := ipOf(web.Spec.ClusterIPs, c.families[0])
	if _, err := c.exec("client", fmt.Sprintf("for i in $(seq 40); do curl -s -o /dev/null http://%s/hostname; done", hostPort(ip, "80"))); err != nil {
		t.Errorf("traffic: %v", err)
	}
	for i := range 12 {
		c.createService(t, fmt.Sprintf("churn-%d", i), map[string]string{"app": "web"})
	}
	for i := 0; i < 12; i += 2 {
		_ = c.cs.CoreV1().Services(c.ns).Delete(ctx, fmt.Sprintf("churn-%d", i), metav1.DeleteOptions{})
	}
	c.createSlowSlice(t)
	c.createOrphanSlice(t)
	c.nodeRun(t, c.nodes[0].Name, "nft", "flush", "chain", "ip", "kube-proxy", "services")
	c.breakSync(t, c.nodes[len(c.nodes)-1].Name)
}

func (c *cluster) createService(t *testing.T, name string, selector map[string]string) *corev1.Service {
	s, err := c.cs.CoreV1().Services(c.ns).Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: selector,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// createSlowSlice: a selector-less Service and its EndpointSlice stamped as
// changed 90 s ago, so its programming latency is at least that.
func (c *cluster) createSlowSlice(t *testing.T) {
	c.createService(t, "slow", nil)
	old := time.Now().Add(-90 * time.Second).UTC().Format(time.RFC3339)
	c.createSlice(t, "slow-1", map[string]string{discovery.LabelServiceName: "slow"},
		map[string]string{corev1.EndpointsLastChangeTriggerTime: old})
}

// createOrphanSlice: an EndpointSlice without the service-name label,
// which no proxy can program.
func (c *cluster) createOrphanSlice(t *testing.T) {
	c.createSlice(t, "orphan", map[string]string{"purpose": "monitoring-test"}, nil)
}

func (c *cluster) createSlice(t *testing.T, name string, labels, annotations map[string]string) {
	ready, port, proto := true, int32(8080), corev1.ProtocolTCP
	addr := "10.244.200.1"
	if c.families[0] == corev1.IPv6Protocol {
		addr = "fd00:10:244:200::1"
	}
	_, err := c.cs.DiscoveryV1().EndpointSlices(c.ns).Create(context.Background(), &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		AddressType: discovery.AddressType(c.families[0]),
		Endpoints:   []discovery.Endpoint{{Addresses: []string{addr}, Conditions: discovery.EndpointConditions{Ready: &ready}}},
		Ports:       []discovery.EndpointPort{{Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// breakSync adds, on node, a chain of someone else's to switchyard's
// table that jumps to Service "doomed"'s chain, then deletes the Service:
// the sync that deletes the chain is refused by the kernel (the chain is
// in use). The foreign chain is removed when the test ends.
func (c *cluster) breakSync(t *testing.T, node string) {
	c.createService(t, "doomed", map[string]string{"app": "web"})
	var chain string
	c.poll("Service doomed's chain on "+node, func(context.Context) (bool, error) {
		out := c.nodeRun(t, node, "nft", "list", "table", "ip", "kube-proxy")
		for _, f := range strings.Fields(out) {
			if strings.HasPrefix(f, "service-") && strings.Contains(f, "-"+c.ns+".doomed.") {
				chain = f
			}
		}
		return chain != "", nil
	})
	c.nodeRun(t, node, "nft", "add", "chain", "ip", "kube-proxy", "monitoring-test-foreign")
	c.nodeRun(t, node, "nft", "add", "rule", "ip", "kube-proxy", "monitoring-test-foreign", "jump", chain)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "exec", node, "nft", "delete", "chain", "ip", "kube-proxy", "monitoring-test-foreign").Run()
	})
	if err := c.cs.CoreV1().Services(c.ns).Delete(context.Background(), "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// nodeRun runs a command in a node's network namespace (named as the
// node) and returns its output.
func (c *cluster) nodeRun(t *testing.T, node string, args ...string) string {
	out, err := exec.Command("ip", append([]string{"netns", "exec", node}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %v\n%s", node, args, err, out)
	}
	return string(out)
}

// dashboardQueries are the mixin's queries and every target of
// switchyard's dashboard, by a name for the report.
func dashboardQueries(t *testing.T) map[string]string {
	out := map[string]string{}
	for k, q := range mixinQueries {
		out["mixin: "+k] = q
	}
	for _, p := range readPanels(t) {
		for _, tg := range p.Targets {
			out["switchyard: "+p.Title+" / "+tg.Legend] = tg.Expr
		}
	}
	return out
}

// dashboardExpr fills the dashboard's variables as Grafana does with
// job "kube-proxy" and every instance.
func dashboardExpr(e string) string {
	return strings.NewReplacer(`$job`, "kube-proxy", `$instance`, ".*").Replace(e)
}

// checkQueries waits (up to 3 minutes) until every query returns at least
// one series, and reports those that never do.
func (c *cluster) checkQueries(t *testing.T, p *framework.Prometheus, queries map[string]string) int {
	pending := map[string]string{}
	for k, q := range queries {
		pending[k] = q
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(pending) > 0 && time.Now().Before(deadline) {
		for k, q := range pending {
			s, err := p.Query(context.Background(), q)
			if err != nil {
				t.Errorf("%s: %v", k, err)
				delete(pending, k)
			} else if len(s) > 0 {
				delete(pending, k)
			}
		}
		time.Sleep(5 * time.Second)
	}
	for _, k := range slices.Sorted(maps.Keys(pending)) {
		t.Errorf("no data: %s: %s", k, pending[k])
	}
	t.Logf("%d of %d dashboard queries return data", len(queries)-len(pending), len(queries))
	return len(queries) - len(pending)
}

// checkAlerts waits (up to 4 minutes) until each alert fires.
func (c *cluster) checkAlerts(t *testing.T, p *framework.Prometheus, names ...string) int {
	firing := map[string]bool{}
	deadline := time.Now().Add(4 * time.Minute)
	for len(firing) < len(names) && time.Now().Before(deadline) {
		s, err := p.Query(context.Background(), `ALERTS{alertstate="firing"}`)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range s {
			if slices.Contains(names, a.Labels["alertname"]) && !firing[a.Labels["alertname"]] {
				firing[a.Labels["alertname"]] = true
				t.Logf("alert %s fires: %v", a.Labels["alertname"], a.Labels)
			}
		}
		time.Sleep(5 * time.Second)
	}
	for _, n := range names {
		if !firing[n] {
			t.Errorf("alert %s never fired", n)
		}
	}
	return len(firing)
}

// rejectConfig rolls the DaemonSet to an invalid --proxy-mode: the
// rolled pod rejects its configuration at start and crash-loops, and its
// target (a not-ready endpoint) is scraped as down.
func (c *cluster) rejectConfig(t *testing.T) {
	patch := `[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--proxy-mode=bogus"}]`
	if _, err := c.run("-n", systemNS, "patch", "ds", daemonSet, "--type=json", "-p", patch); err != nil {
		t.Fatal(err)
	}
}

// removeProxies gives the DaemonSet a node selector no node has: every
// switchyard pod goes (the rules stay in the kernels).
func (c *cluster) removeProxies(t *testing.T) {
	patch := `{"spec":{"template":{"spec":{"nodeSelector":{"switchyard-monitoring-test":"no-such-node"}}}}}`
	if _, err := c.run("-n", systemNS, "patch", "ds", daemonSet, "--type=merge", "-p", patch); err != nil {
		t.Fatal(err)
	}
}
