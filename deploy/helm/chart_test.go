package helm

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// helmBin is the helm binary (`make chart` builds it from hack/tools/helm
// and sets SWITCHYARD_HELM); without it the tests skip.
func helmBin(t *testing.T) string {
	t.Helper()
	h := os.Getenv("SWITCHYARD_HELM")
	if h == "" {
		t.Skip("SWITCHYARD_HELM is not set (make chart sets it)")
	}
	return h
}

// render runs `helm template` of the chart in kube-system with the --set
// values and returns the objects by "Kind/name", or the error output.
func render(t *testing.T, sets ...string) (map[string]map[string]any, string) {
	t.Helper()
	args := []string{"template", "switchyard", "switchyard", "--namespace", "kube-system"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helmBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, errb.String()
	}
	return objects(t, out.String()), ""
}

// objects parses a YAML stream into objects keyed "Kind/name", the
// ConfigMap's config.conf parsed too (comments and key order aside).
func objects(t *testing.T, stream string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(stream, "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("parsing %q: %v", doc, err)
		}
		if obj == nil {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		if data, ok := obj["data"].(map[string]any); ok && data["config.conf"] != nil {
			var conf map[string]any
			if err := yaml.Unmarshal([]byte(data["config.conf"].(string)), &conf); err != nil {
				t.Fatalf("config.conf: %v", err)
			}
			data["config.conf"] = conf
		}
		out[obj["kind"].(string)+"/"+meta["name"].(string)] = obj
	}
	return out
}

// deployObjects reads deploy/'s kustomization resources.
func deployObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	var k struct{ Resources []string }
	data, err := os.ReadFile(filepath.Join("..", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	var stream []string
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join("..", r))
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, string(b))
	}
	return objects(t, strings.Join(stream, "\n---\n"))
}

// TestChartRendersDeploy: with default values the chart renders exactly
// deploy/'s objects; the one addition is the pod template's
// checksum/config annotation (a changed configuration rolls the pods).
func TestChartRendersDeploy(t *testing.T) {
	got, errs := render(t)
	if got == nil {
		t.Fatalf("helm template: %s", errs)
	}
	tmpl := got["DaemonSet/switchyard"]["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	ann, _ := tmpl["annotations"].(map[string]any)
	if ann["checksum/config"] == nil || len(ann) != 1 {
		t.Errorf("pod annotations %v, want checksum/config alone", ann)
	}
	delete(tmpl, "annotations")
	if d := cmp.Diff(deployObjects(t), got); d != "" {
		t.Errorf("chart defaults vs deploy/ (-deploy +chart):\n%s", d)
	}
}

// TestChartValues: the values an operator sets reach the objects, and
// contradictory ones fail the render with a message.
func TestChartValues(t *testing.T) {
	got, errs := render(t, "mode=nftables", "image.tag=v1.2.3", "initOnly=true", "extraArgs={--service-traffic-metrics,-v=2}",
		"conntrack.maxPerCore=0", "metricsBindAddress=0.0.0.0:10249", "serviceMonitor.enabled=true")
	if got == nil {
		t.Fatalf("helm template: %s", errs)
	}
	conf := got["ConfigMap/switchyard"]["data"].(map[string]any)["config.conf"].(map[string]any)
	if conf["mode"] != "nftables" || conf["conntrack"].(map[string]any)["maxPerCore"] != float64(0) || conf["metricsBindAddress"] != "0.0.0.0:10249" {
		t.Errorf("config.conf: %v", conf)
	}
	pod := got["DaemonSet/switchyard"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	c := pod["containers"].([]any)[0].(map[string]any)
	init := pod["initContainers"].([]any)[0].(map[string]any)
	if c["image"] != "localhost/switchyard:v1.2.3" || init["image"] != "localhost/switchyard:v1.2.3" {
		t.Errorf("images %v, %v", c["image"], init["image"])
	}
	if args := c["args"].([]any); len(args) != 4 || args[2] != "--service-traffic-metrics" || args[3] != "-v=2" {
		t.Errorf("args %v", args)
	}
	if sc := c["securityContext"].(map[string]any); sc["privileged"] != false {
		t.Errorf("initOnly: the proxy container stays privileged: %v", sc)
	}
	if got["ServiceMonitor/switchyard"] == nil || got["Service/switchyard-metrics"] == nil {
		t.Errorf("serviceMonitor.enabled rendered no ServiceMonitor and Service: %v", keys(got))
	}
	for _, bad := range []struct {
		sets []string
		want string
	}{
		{[]string{"serviceMonitor.enabled=true"}, "serviceMonitor.enabled needs metricsBindAddress"}, // metrics on loopback
		{[]string{"initOnly=true", "mode=ipvs"}, "initOnly is not for ipvs mode"},
	} {
		if got, errs := render(t, bad.sets...); got != nil || !strings.Contains(errs, bad.want) {
			t.Errorf("%v rendered (%q); want a failure saying %q", bad.sets, errs, bad.want)
		}
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestChartMonitoring: the chart's alerts and dashboard are deploy/monitoring's
// files, byte for byte, and render when switched on.
func TestChartMonitoring(t *testing.T) {
	for _, f := range []string{"alerts.yaml", "switchyard-dashboard.json"} {
		want, err := os.ReadFile(filepath.Join("..", "monitoring", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("switchyard", "files", f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("deploy/helm/switchyard/files/%s differs from deploy/monitoring/%s (%v): copy it", f, f, err)
		}
	}
	got, errs := render(t, "prometheusRule.enabled=true", "dashboards.enabled=true")
	if got == nil {
		t.Fatalf("helm template: %s", errs)
	}
	groups := got["PrometheusRule/switchyard"]["spec"].(map[string]any)["groups"].([]any)
	if rules := groups[0].(map[string]any)["rules"].([]any); len(rules) != 6 {
		t.Errorf("%d alerts rendered, want 6", len(rules))
	}
	checkRules(t, got["PrometheusRule/switchyard"]["spec"])
	dash := got["ConfigMap/switchyard-dashboard"]["data"].(map[string]any)["switchyard-dashboard.json"].(string)
	var d map[string]any
	if err := json.Unmarshal([]byte(dash), &d); err != nil || d["uid"] != "switchyard" {
		t.Errorf("dashboard ConfigMap: %v, uid %v", err, d["uid"])
	}
}

// checkRules runs Prometheus' own checker (promtool, Debian's prometheus
// package) over the PrometheusRule's spec, a rules file.
func checkRules(t *testing.T, spec any) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (apt-get install prometheus): %v", err)
	}
	data, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}
