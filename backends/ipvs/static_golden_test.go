package ipvs

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/proxier"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current render")

// TestStaticRulesGolden pins the companion iptables rules that carry the
// local-traffic match of each --detect-local-mode, in both families: nat
// KUBE-SERVICES sends local traffic to the internal fwmark services and
// masquerades cluster-IP traffic that is not local.
func TestStaticRulesGolden(t *testing.T) {
	node := proxier.NodeInfo{PodCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}}
	for _, tc := range []struct {
		name string
		d    proxier.LocalDetector
	}{
		{"cluster-cidr-v4-only", proxier.DetectByClusterCIDRs(netip.MustParsePrefix("10.244.0.0/16"))},
		{"node-cidr", proxier.DetectByNodeCIDR()},
		{"bridge", proxier.DetectByBridge("cbr0")},
		{"interface-prefix", proxier.DetectByInterfacePrefix("cali")},
		{"none", proxier.LocalDetector{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{LocalDetector: tc.d}
			var b strings.Builder
			for _, f := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				b.WriteString("# family " + string(f) + "\n")
				for _, r := range servicesChain(c, f, tc.d.Match(f, node)) {
					b.WriteString(r + "\n")
				}
			}
			compareGolden(t, filepath.Join("testdata", "detect-"+tc.name+".golden"), b.String())
		})
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s (-want +got):\n%s", path, d)
	}
}
