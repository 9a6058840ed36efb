package framework

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Upstream kube-proxy's identity, as kubeadm deploys it: ServiceAccount
// kube-system/kube-proxy bound to the bootstrap ClusterRole
// system:node-proxier.
const (
	KubeProxySAName      = "kube-proxy"
	kubeProxyClusterRole = "system:node-proxier"
)

var kubeProxyBin struct {
	once sync.Once
	path string
	err  error
}

// KubeProxyBinary builds (or finds in the cache) upstream kube-proxy with
// hack/build-tools.sh, once per test binary.
func (s *Suite) KubeProxyBinary(ctx context.Context) (string, error) {
	kubeProxyBin.once.Do(func() {
		cmd := exec.CommandContext(ctx, filepath.Join(s.Root, "hack", "build-tools.sh"), "kube-proxy")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			kubeProxyBin.err = fmt.Errorf("hack/build-tools.sh kube-proxy: %w: %s", err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		kubeProxyBin.path = filepath.Join(lines[len(lines)-1], "kube-proxy")
	})
	return kubeProxyBin.path, kubeProxyBin.err
}

// KubeProxyKubeconfig creates kube-proxy's ServiceAccount and binding (if
// missing) and writes a kubeconfig for it to path.
func (c *Cluster) KubeProxyKubeconfig(ctx context.Context, path string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: DaemonSANamespace, Name: KubeProxySAName}}
	if _, err := c.Client.CoreV1().ServiceAccounts(DaemonSANamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount kube-proxy: %w", err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "switchyard-e2e:kube-proxy"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kubeProxyClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: DaemonSANamespace, Name: KubeProxySAName}},
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create clusterrolebinding for kube-proxy: %w", err)
	}
	return c.ServiceAccountKubeconfig(ctx, DaemonSANamespace, KubeProxySAName, path, daemonTokenTTL)
}

// StartKubeProxy runs upstream kube-proxy in the Env's node namespace with
// the same flags StartDaemon gives switchyard (kube-proxy's flag names are
// switchyard's), as ServiceAccount kube-system/kube-proxy. It does not wait
// for health.
func (e *Env) StartKubeProxy(t testing.TB, args ...string) *Daemon {
	t.Helper()
	bin, err := e.Suite.KubeProxyBinary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(t.TempDir(), "kube-proxy.kubeconfig")
	if err := e.Suite.Cluster.KubeProxyKubeconfig(context.Background(), kc); err != nil {
		t.Fatal(err)
	}
	all := e.daemonArgs(kc, args)
	d := StartDaemonIn(t, bin, e.Topo.NodeNS, all...)
	d.Process.Name = "kube-proxy-" + e.Topo.NodeNS
	return d
}
