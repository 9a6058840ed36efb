package proxier_test

import (
	"bytes"
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/yaml"

	"github.com/switchyard-proxy/switchyard/internal/kubeapi"
	kubeclientset "github.com/switchyard-proxy/switchyard/internal/kubeapi/clientset"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/healthcheck"
)

// countingBackend counts syncs; it programs nothing.
type countingBackend struct {
	mu    sync.Mutex
	syncs int
}

func (b *countingBackend) Name() string { return "counting" }
func (b *countingBackend) Sync(context.Context, *proxier.State, *proxier.Diff) (proxier.SyncResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.syncs++
	return proxier.SyncResult{Full: true}, nil
}
func (b *countingBackend) Cleanup(context.Context) error { return nil }
func (b *countingBackend) count() int                    { b.mu.Lock(); defer b.mu.Unlock(); return b.syncs }

// runProxier runs a Proxier over client until the test ends.
func runProxier(t *testing.T, client *fake.Clientset, b proxier.Backend, health proxier.HealthUpdater) {
	t.Helper()
	p := proxier.New(kubeclientset.New(client), b, proxier.Config{NodeName: "node-a", SyncPeriod: time.Hour}, nil, health, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// captureKlog sends klog's output to a buffer for the test.
func captureKlog(t *testing.T) *syncBuffer {
	t.Helper()
	buf := &syncBuffer{}
	klog.LogToStderr(false)
	klog.SetOutput(buf)
	t.Cleanup(func() { klog.Flush(); klog.SetOutput(os.Stderr); klog.LogToStderr(true) })
	return buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestForbiddenListIsReported: without RBAC (every list of services
// denied) the proxier does not just hang: it logs which resource is
// denied and what to check, programs nothing, and /healthz turns
// unhealthy once the health timeout passes without a first sync.
func TestForbiddenListIsReported(t *testing.T) {
	logs := captureKlog(t)
	client := fake.NewClientset()
	client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "",
			errorString(`User "system:serviceaccount:kube-system:switchyard" cannot list resource "services"`))
	})
	clk := clocktesting.NewFakeClock(time.Now())
	health := healthcheck.NewProxierHealthServer(healthcheck.ProxierHealthConfig{HealthTimeout: time.Minute, Clock: clk})
	b := &countingBackend{}
	runProxier(t, client, b, health)

	eventually(t, "a log line naming the denied resource", func() bool {
		klog.Flush()
		out := logs.String()
		return strings.Contains(out, "denies switchyard access") && strings.Contains(out, `resource="services"`) &&
			strings.Contains(out, "ClusterRoleBinding")
	})
	if !health.IsHealthy() {
		t.Errorf("unhealthy before the health timeout")
	}
	clk.Step(time.Minute + time.Second)
	if health.IsHealthy() {
		t.Errorf("still healthy a health timeout after start without any sync")
	}
	if n := b.count(); n != 0 {
		t.Errorf("%d syncs without the services list", n)
	}
	// klog writes an error line to each severity's output: count distinct lines.
	lines := map[string]bool{}
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "denies switchyard access") {
			lines[l] = true
		}
	}
	if n := len(lines); n != 1 {
		t.Errorf("denied access logged %d times, want once per %v:\n%s", n, 30*time.Second, logs.String())
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

// TestClusterRoleGrantsOnlyWhatIsUsed compares deploy/clusterrole.yaml with
// the requests the daemon makes: those of the proxier's informers up to and
// after the first sync (recorded by a fake clientset), plus every request
// of kubeapi.Client, through which all of the daemon's API access goes
// (its sources import no clientset: checked by a scan).
func TestClusterRoleGrantsOnlyWhatIsUsed(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	client := fake.NewClientset(node)
	b := &countingBackend{}
	runProxier(t, client, b, nil)
	eventually(t, "the first sync", func() bool { return b.count() > 0 })

	checkNoClientset(t)
	used := map[string]bool{}
	for _, r := range kubeapi.Requests() {
		used[r] = true
	}
	for _, a := range client.Actions() {
		gvr := a.GetResource()
		used[gvr.Group+"/"+gvr.Resource+":"+a.GetVerb()] = true
	}
	granted := map[string]bool{}
	for _, r := range readClusterRole(t).Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted[g+"/"+res+":"+v] = true
				}
			}
		}
	}
	for k := range used {
		if !granted[k] {
			t.Errorf("the daemon uses %s, which the ClusterRole does not grant", k)
		}
	}
	for k := range granted {
		if !used[k] {
			t.Errorf("the ClusterRole grants %s, which the daemon never uses", k)
		}
	}
	t.Logf("requests made: %v", slices.Sorted(maps.Keys(used)))
}

// checkNoClientset fails for any of the daemon's non-test sources
// (everything but e2e/, hack/ and kubeapi's own adapter) that imports a
// client-go clientset: API requests go through kubeapi.Client only.
func checkNoClientset(t *testing.T) {
	t.Helper()
	root := filepath.Join("..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "e2e" || d.Name() == "hack" || strings.HasPrefix(d.Name(), ".") ||
			path == filepath.Join(root, "internal", "kubeapi", "clientset")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasPrefix(string(src), "//go:build tools") { // never built
			return nil
		}
		if strings.Contains(string(src), `"k8s.io/client-go/kubernetes`) || strings.Contains(string(src), `"k8s.io/client-go/informers`) {
			t.Errorf("%s imports a client-go clientset or informer factory; use kubeapi.Client", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readClusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "clusterrole.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &role); err != nil {
		t.Fatalf("deploy/clusterrole.yaml: %v", err)
	}
	if role.Kind != "ClusterRole" || len(role.Rules) == 0 {
		t.Fatalf("deploy/clusterrole.yaml holds a %q with %d rules", role.Kind, len(role.Rules))
	}
	return &role
}
