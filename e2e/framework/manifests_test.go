package framework

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// deployObjects strictly decodes deploy/*.yaml into typed objects keyed by
// "Kind/name": a misspelt field fails here, not on a real cluster.
func deployObjects(t *testing.T) map[string]runtime.Object {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ReadManifests(filepath.Join(root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	out := make(map[string]runtime.Object)
	for _, u := range objs {
		b, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		obj, gvk, err := dec.Decode(b, nil, nil)
		if err != nil {
			t.Fatalf("strict decode of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		out[gvk.Kind+"/"+u.GetName()] = obj
	}
	return out
}

func TestDeployObjectSet(t *testing.T) {
	var got []string
	for k := range deployObjects(t) {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"ClusterRole/switchyard", "ClusterRoleBinding/switchyard", "ConfigMap/switchyard",
		"DaemonSet/switchyard", "ServiceAccount/switchyard"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deploy/ objects (-want +got):\n%s", diff)
	}
}

// TestDeployRBACIsLeastPrivilege pins the exact permissions: read-only on
// the proxy inputs, and one write, the start Event (proxier/access_test.go
// checks them against the requests the daemon makes).
func TestDeployRBACIsLeastPrivilege(t *testing.T) {
	objs := deployObjects(t)
	role := objs["ClusterRole/switchyard"].(*rbacv1.ClusterRole)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
	}
	crb := objs["ClusterRoleBinding/switchyard"].(*rbacv1.ClusterRoleBinding)
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: DaemonSAName, Namespace: DaemonSANamespace}}
	if diff := cmp.Diff(wantSubjects, crb.Subjects); diff != "" || crb.RoleRef.Name != role.Name {
		t.Errorf("binding roleRef %q subjects (-want +got):\n%s", crb.RoleRef.Name, diff)
	}
	sa := objs["ServiceAccount/switchyard"].(*corev1.ServiceAccount)
	if sa.Namespace != DaemonSANamespace {
		t.Errorf("ServiceAccount namespace %q, want %q", sa.Namespace, DaemonSANamespace)
	}
}

// TestKustomizationListsEveryManifest keeps `kubectl apply -k deploy/` and
// the files in deploy/ in step: a new manifest nobody lists is never applied.
func TestKustomizationListsEveryManifest(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy")
	listed, err := manifestFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	all, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(f string) bool { return filepath.Base(f) == KustomizationFile })
	slices.Sort(listed)
	if diff := cmp.Diff(all, listed); diff != "" {
		t.Errorf("deploy/*.yaml vs %s resources (-files +listed):\n%s", KustomizationFile, diff)
	}
}

func TestDeployDaemonSetShape(t *testing.T) {
	ds := deployObjects(t)["DaemonSet/switchyard"].(*appsv1.DaemonSet)
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	checks := map[string]bool{
		"namespace kube-system":      ds.Namespace == DaemonSANamespace,
		"serviceAccountName":         pod.ServiceAccountName == DaemonSAName,
		"hostNetwork":                pod.HostNetwork,
		"privileged":                 c.SecurityContext != nil && *c.SecurityContext.Privileged,
		"system-node-critical":       pod.PriorityClassName == "system-node-critical",
		"tolerate everything":        cmp.Equal(pod.Tolerations, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}),
		"rolling maxUnavailable 10%": ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String() == "10%",
		"livez probe on 10256":       c.LivenessProbe.HTTPGet.Path == "/livez" && c.LivenessProbe.HTTPGet.Port.IntValue() == 10256,
		"hostname from nodeName":     slices.Contains(c.Args, "--hostname-override=$(NODE_NAME)") && c.Env[0].ValueFrom.FieldRef.FieldPath == "spec.nodeName",
		"xtables lock mounted":       mountsHostPath(pod, c, "/run/xtables.lock"),
		"no /lib/modules mount":      !mountsHostPath(pod, c, "/lib/modules"),
		"config file from ConfigMap": configArgMatchesMount(pod, c),
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("DaemonSet: %s does not hold", name)
		}
	}
}

func mountsHostPath(pod corev1.PodSpec, c corev1.Container, path string) bool {
	for _, v := range pod.Volumes {
		if v.HostPath == nil || v.HostPath.Path != path {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && m.MountPath == path {
				return true
			}
		}
	}
	return false
}

// configArgMatchesMount checks that --config points at a key of the
// switchyard ConfigMap as mounted into the container.
func configArgMatchesMount(pod corev1.PodSpec, c corev1.Container) bool {
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil || v.ConfigMap.Name != "switchyard" {
			continue
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && slices.Contains(c.Args, "--config="+m.MountPath+"/config.conf") {
				return true
			}
		}
	}
	return false
}

func TestDeployConfigMapHoldsKubeProxyConfiguration(t *testing.T) {
	cm := deployObjects(t)["ConfigMap/switchyard"].(*corev1.ConfigMap)
	var cfg struct {
		APIVersion  string `json:"apiVersion"`
		Kind        string `json:"kind"`
		Mode        string `json:"mode"`
		ClusterCIDR string `json:"clusterCIDR"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["config.conf"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.APIVersion != "kubeproxy.config.k8s.io/v1alpha1" || cfg.Kind != "KubeProxyConfiguration" || cfg.Mode != "iptables" {
		t.Errorf("config.conf = %+v, want a KubeProxyConfiguration v1alpha1 in iptables mode", cfg)
	}
	if !strings.Contains(cfg.ClusterCIDR, "/") {
		t.Errorf("clusterCIDR %q is not a CIDR", cfg.ClusterCIDR)
	}
}
