//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

const configHeader = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"

// badConfig is an invalid or partial KubeProxyConfiguration (passed with
// --config unless config is nil) or contradictory flags, with what the
// error must name.
type badConfig struct {
	name   string
	config *string
	flags  []string
	want   []string
}

func cfg(s string) *string { return &s }

func badConfigCases() []badConfig {
	return []badConfig{
		{"config: invalid clusterCIDR", cfg(configHeader + "clusterCIDR: notacidr\n"), nil, []string{"clusterCIDR", "notacidr"}},
		{"config: truncated", cfg(configHeader + "mode: [\n"), nil, []string{"parsing YAML", "line 3"}},
		{"config: wrong kind", cfg("apiVersion: v1\nkind: ConfigMap\n"), nil, []string{"apiVersion", "kubeproxy.config.k8s.io/v1alpha1"}},
		{"config: empty", cfg(""), nil, []string{"KubeProxyConfiguration"}},
		{"config: bad mode", cfg(configHeader + "mode: bogus\n"), nil, []string{"mode", "bogus"}},
		{"config: min above max sync period", cfg(configHeader + "iptables:\n  syncPeriod: 5s\n  minSyncPeriod: 10s\n"), nil,
			[]string{"iptables.minSyncPeriod", "iptables.syncPeriod"}},
		{"config: unparsable duration", cfg(configHeader + "iptables:\n  syncPeriod: fast\n"), nil, []string{"iptables.syncPeriod", "fast"}},
		{"config: port out of range", cfg(configHeader + "metricsBindAddress: 1.2.3.4:99999\n"), nil, []string{"metricsBindAddress", "99999"}},
		{"config: missing file", nil, []string{"--config=/nonexistent/kube-proxy.yaml"}, []string{"/nonexistent/kube-proxy.yaml"}},
		{"flags: min above max sync period", nil, []string{"--iptables-min-sync-period=10s", "--iptables-sync-period=5s"},
			[]string{"--iptables-min-sync-period", "--iptables-sync-period"}},
		{"flags: nodeport keyword twice", nil, []string{"--nodeport-addresses=primary,10.0.0.0/8,primary"}, []string{"--nodeport-addresses", "duplicate keyword"}},
		{"flags: masquerade bit", nil, []string{"--iptables-masquerade-bit=40"}, []string{"--iptables-masquerade-bit", "40"}},
		{"flags: two IPv4 cluster CIDRs", nil, []string{"--cluster-cidr=10.0.0.0/8,10.1.0.0/16"}, []string{"--cluster-cidr"}},
		{"flags: bad mode with --cleanup", nil, []string{"--cleanup", "--proxy-mode=bogus"}, []string{"--proxy-mode", "bogus"}},
		{"flags: unknown flag", nil, []string{"--bogus-flag"}, []string{"--bogus-flag"}},
	}
}

// testBadConfig runs the built binary with each bad configuration inside a
// fresh network namespace: exit code 1, an error naming the field, and no
// table of any iptables flavour or family created there.
func testBadConfig(t *testing.T) {
	bin, err := suite.DaemonBinary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ns := freshNetns(t)
	dir := t.TempDir()
	for i, tc := range badConfigCases() {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--kubeconfig=/nonexistent", "--hostname-override=node-x"}
			if tc.config != nil {
				path := filepath.Join(dir, fmt.Sprintf("config-%d.yaml", i))
				if err := os.WriteFile(path, []byte(*tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config="+path)
			}
			code, stderr := runExit(t, ns, bin, append(args, tc.flags...)...)
			if code != 1 {
				t.Errorf("exit code %d, want 1; stderr:\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error does not name %q:\n%s", w, stderr)
				}
			}
			t.Logf("%s", strings.TrimSpace(stderr))
			if rules := kernelState(t, ns); rules != "" {
				t.Errorf("the kernel was touched:\n%s", rules)
			}
		})
	}
	// The check itself sees a change.
	framework.RunIn(t.Context(), ns, "iptables", "-t", "nat", "-N", "SY-PROBE")
	if kernelState(t, ns) == "" {
		t.Errorf("kernelState does not see a chain created in %s", ns)
	}
}

// freshNetns creates an empty network namespace deleted with the test.
func freshNetns(t *testing.T) string {
	t.Helper()
	name := "sy-badcfg-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return name
}

// runExit runs bin in ns and returns its exit code and stderr.
func runExit(t *testing.T, ns, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, bin}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stderr.String()
	}
	t.Fatalf("running %s: %v", bin, err)
	return 0, ""
}

// kernelState is every table and chain any iptables flavour shows in ns
// ("" when untouched).
func kernelState(t *testing.T, ns string) string {
	t.Helper()
	var out strings.Builder
	for _, save := range []string{"iptables-nft-save", "ip6tables-nft-save", "iptables-legacy-save", "ip6tables-legacy-save"} {
		text, err := framework.RunIn(t.Context(), ns, save)
		if err != nil {
			t.Fatalf("%s in %s: %v\n%s", save, ns, err, text)
		}
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "*") || strings.HasPrefix(l, ":") || strings.HasPrefix(l, "-") {
				out.WriteString(save + ": " + l + "\n")
			}
		}
	}
	return out.String()
}
