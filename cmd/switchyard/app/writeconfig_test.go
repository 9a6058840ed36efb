package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriteConfigRoundTrip: --write-config-to writes a file that --config
// reads back to the same Options, without a warning, for defaults, for a
// file, and for a file overridden by flags (every mode).
func TestWriteConfigRoundTrip(t *testing.T) {
	full := writeConfig(t, fullFile)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"full file", []string{"--config", full}},
		{"file and flags", []string{"--config", full, "--proxy-mode=nftables", "--masquerade-all=false",
			"--conntrack-max-per-core=0", "--iptables-localhost-nodeports=false", "--oom-score-adj=5", "--v=3"}},
		{"userspace", []string{"--proxy-mode=userspace", "--udp-timeout=3s", "--cluster-cidr=10.0.0.0/8,fd00::/64"}},
		{"interface prefix", []string{"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=cali"}},
		{"node CIDR", []string{"--config", full, "--detect-local-mode=NodeCIDR"}},
		{"calico file", []string{"--config", writeConfig(t, calicoFile)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := execute(t, tc.args...)
			if want.err != nil {
				t.Fatal(want.err)
			}
			out := filepath.Join(t.TempDir(), "effective.yaml")
			wrote := execute(t, append(tc.args, "--write-config-to", out)...)
			if wrote.err != nil || wrote.calls != 0 {
				t.Fatalf("--write-config-to: err %v, run called %d times (want 0)", wrote.err, wrote.calls)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(data), "apiVersion: kubeproxy.config.k8s.io/v1alpha1\n") {
				t.Errorf("file does not start with the apiVersion:\n%s", data)
			}
			got := execute(t, "--config", out)
			if got.err != nil {
				t.Fatalf("reading the written file back: %v\n%s", got.err, data)
			}
			// Settings of another mode warn as they did when given.
			for _, w := range got.warnings {
				if !strings.Contains(w, "has no effect") || len(want.warnings) == 0 {
					t.Errorf("reading it back warned: %q (first run: %q)", w, want.warnings)
				}
			}
			got.opts.ConfigFile, want.opts.ConfigFile = "", ""
			// Flag-only settings have no field: they keep their defaults.
			want.opts.ServiceProxyName, want.opts.Master = "", ""
			if diff := cmp.Diff(want.opts, got.opts, cmpOpts); diff != "" {
				t.Errorf("read back differs (-want +got):\n%s\nfile:\n%s", diff, data)
			}
		})
	}
}
