//go:build e2e

package e2e

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/e2e/framework"
)

// nodeNFT runs nft in the node namespace.
func nodeNFT(t *testing.T, m *modeEnv, args ...string) string {
	t.Helper()
	return nodeCommand(t, m, append([]string{"nft"}, args...)...)
}

// testNFTListing checks what an operator sees with `nft list table ip
// kube-proxy`: the dispatch on service-ips, a chain named after the
// service port, and its cluster IP in the verdict map.
func testNFTListing(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "listing", m.Topo.Pods...)
	chain := m.Namespace + "/listing/tcp/"
	var out string
	err := framework.WaitFor(converge, func() (bool, error) {
		out = nodeNFT(t, m, "list", "table", "ip", "kube-proxy")
		return strings.Contains(out, chain), nil
	})
	if err != nil {
		t.Fatalf("nft list table ip kube-proxy never showed a chain for %s:\n%s", chain, out)
	}
	for _, want := range []string{
		"ip daddr . meta l4proto . th dport vmap @service-ips",
		svc.Spec.ClusterIP + " . tcp . 80 : goto service-",
		"numgen random mod 65536",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("nft list table ip kube-proxy: no %q", want)
		}
	}
	t.Logf("nft list chain ip kube-proxy services:\n%s", nodeNFT(t, m, "list", "chain", "ip", "kube-proxy", "services"))
}

// checkNoNFTFor checks that no chain of the table names the services.
func checkNoNFTFor(t *testing.T, m *modeEnv, names ...string) {
	t.Helper()
	out := nodeNFT(t, m, "list", "table", "ip", "kube-proxy")
	for _, name := range names {
		if strings.Contains(out, m.Namespace+"/"+name+"/") {
			t.Errorf("nft table mentions %s/%s", m.Namespace, name)
		}
	}
}

// checkNFTCleanedUp: after --cleanup no kube-proxy table is left, and no
// other table was touched.
func checkNFTCleanedUp(t *testing.T, m *modeEnv) {
	t.Helper()
	if out := nodeNFT(t, m, "list", "tables"); strings.Contains(out, "kube-proxy") {
		t.Errorf("nft tables after --cleanup:\n%s", out)
	}
}
