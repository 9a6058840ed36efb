package app

import (
	"testing"

	"k8s.io/component-base/featuregate"
)

// TestFeatureGates: kube-proxy's gates are accepted from flags and file
// (flags win), with their v1.37 defaults.
func TestFeatureGates(t *testing.T) {
	file := writeConfig(t, header+"featureGates:\n  NFTablesNetlink: false\n  ContextualLogging: false\n")
	for _, tc := range []struct {
		name string
		args []string
		want map[string]bool
	}{
		{"defaults", nil, map[string]bool{"NFTablesNetlink": true, "KubeProxyIPVS": true, "PreferSameTrafficDistribution": true}},
		{"flag", []string{"--feature-gates=NFTablesNetlink=false,KubeProxyNFTablesLocalhostNodePorts=true"},
			map[string]bool{"NFTablesNetlink": false, "KubeProxyNFTablesLocalhostNodePorts": true}},
		{"file", []string{"--config", file}, map[string]bool{"NFTablesNetlink": false, "ContextualLogging": false}},
		{"flag wins over file", []string{"--config", file, "--feature-gates=KubeProxyIPVS=false"},
			map[string]bool{"NFTablesNetlink": true, "KubeProxyIPVS": false, "ContextualLogging": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := execute(t, tc.args...)
			if res.err != nil {
				t.Fatal(res.err)
			}
			for gate, want := range tc.want {
				if got := res.opts.FeatureGates.Enabled(featuregate.Feature(gate)); got != want {
					t.Errorf("%s = %v, want %v", gate, got, want)
				}
			}
		})
	}
}

func TestFeatureGateLockedToDefault(t *testing.T) {
	res := execute(t, "--feature-gates=PreferSameTrafficDistribution=false")
	if res.err == nil {
		t.Fatal("a GA gate locked to true was turned off without an error")
	}
}

// TestLocalhostGateOff: the KubeProxyNFTablesLocalhostNodePorts gate set
// to false turns the localhost relay off; on, or unset, it changes
// nothing, and no gate is warned about.
func TestLocalhostGateOff(t *testing.T) {
	for gate, off := range map[string]bool{"": false, "=true": false, "=false": true} {
		args := []string{"--proxy-mode=nftables"}
		if gate != "" {
			args = append(args, "--feature-gates=KubeProxyNFTablesLocalhostNodePorts"+gate)
		}
		res := execute(t, args...)
		if res.err != nil || len(res.warnings) != 0 {
			t.Fatalf("gate%q: err %v, warnings %q", gate, res.err, res.warnings)
		}
		if res.opts.LocalhostRelayOff != off {
			t.Errorf("gate%q: LocalhostRelayOff %v, want %v", gate, res.opts.LocalhostRelayOff, off)
		}
	}
}
