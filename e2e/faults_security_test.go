//go:build e2e

package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// testNoRBAC runs the daemon as a ServiceAccount without the
// ClusterRoleBinding: it must not hang silently. It logs that the API
// denies it and what to check, programs nothing, keeps running, and
// /healthz fails once twice the sync period passed without a first sync.
func testNoRBAC(t *testing.T) {
	const saName = "switchyard-unbound"
	sas := suite.Cluster.Client.CoreV1().ServiceAccounts(framework.DaemonSANamespace)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: saName}}
	if _, err := sas.Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sas.Delete(t.Context(), saName, metav1.DeleteOptions{}) })
	kubeconfig := filepath.Join(t.TempDir(), "unbound.kubeconfig")
	if err := suite.Cluster.ServiceAccountKubeconfig(t.Context(), framework.DaemonSANamespace, saName, kubeconfig, time.Hour); err != nil {
		t.Fatal(err)
	}
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: 1})
	start := time.Now()
	d := env.StartDaemon(t, "--kubeconfig="+kubeconfig, "--iptables-sync-period=5s")
	var logged time.Duration
	err := framework.WaitFor(converge, func() (bool, error) {
		logged = time.Since(start)
		return logHas(d, "denies switchyard access", `resource="services"`, "ClusterRoleBinding"), nil
	})
	if err != nil {
		t.Fatalf("no clear log line about the denied list:\n%s", d.LogTail(20))
	}
	var code int
	var body string
	err = framework.WaitFor(converge+10*time.Second, func() (bool, error) {
		code, body, _ = d.Get(t.Context(), d.HealthzAddr, "/healthz")
		return code == 503, nil
	})
	unhealthy := time.Since(start)
	if err != nil {
		t.Errorf("/healthz never failed without RBAC: last %d %s", code, body)
	}
	if exited, err := d.Exited(); exited {
		t.Errorf("daemon exited: %v", err)
	}
	if rules := chainRules(t.Context(), env, "iptables", "nat", "KUBE-SERVICES"); rules != nil {
		t.Errorf("daemon programmed KUBE-SERVICES without being able to list services: %q", rules)
	}
	_, line := ruleWith(strings.Split(readLog(t, d), "\n"), "denies switchyard access")
	t.Logf("denied access logged after %s, /healthz 503 after %s (%s):\n%s", secs(logged), secs(unhealthy), body, line)
}

// testExposure checks what the daemon exposes with default bind flags:
// metrics only on loopback, /healthz and /livez bodies without object
// names.
func testExposure(t *testing.T) {
	env := framework.Setup(t, suite, framework.TopologySpec{Pods: 1})
	bin, err := suite.DaemonBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range framework.DefaultDaemonArgs(suite.DaemonKubeconfig, env.Topo.NodeName) {
		if !strings.HasPrefix(a, "--metrics-bind-address") && !strings.HasPrefix(a, "--healthz-bind-address") {
			args = append(args, a)
		}
	}
	d := framework.StartDaemonIn(t, bin, env.Topo.NodeNS, args...)
	if err := d.WaitHealthy(converge); err != nil {
		t.Fatal(err)
	}
	env.EchoService(t, "secret-name", env.Topo.Pods...)
	listeners := nodeRun(t, env, "ss", "-Hltn")
	t.Logf("listening sockets in the node namespace:\n%s", listeners)
	if !hasListener(listeners, "127.0.0.1:10249") || hasListener(listeners, "0.0.0.0:10249") || hasListener(listeners, "*:10249") {
		t.Errorf("metrics must listen on 127.0.0.1:10249 only by default")
	}
	for _, path := range []string{"/healthz", "/livez"} {
		code, body, err := d.Get(t.Context(), d.HealthzAddr, path)
		if err != nil || code != 200 {
			t.Fatalf("GET %s: %d %v", path, code, err)
		}
		var fields map[string]any
		if err := json.Unmarshal([]byte(body), &fields); err != nil {
			t.Fatalf("%s body %q: %v", path, body, err)
		}
		for k := range fields {
			if !slices.Contains([]string{"lastUpdated", "currentTime", "nodeEligible", "healthy"}, k) {
				t.Errorf("%s exposes field %q", path, k)
			}
		}
		for _, name := range []string{env.Namespace, "secret-name", env.Topo.NodeName} {
			if strings.Contains(body, name) {
				t.Errorf("%s exposes %q: %s", path, name, body)
			}
		}
		t.Logf("%s: %s", path, body)
	}
}

func hasListener(ss, addr string) bool {
	for _, l := range strings.Split(ss, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[3] == addr {
			return true
		}
	}
	return false
}

func readLog(t *testing.T, d *framework.Daemon) string {
	t.Helper()
	return d.LogTail(1 << 20)
}
