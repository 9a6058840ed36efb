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
// kube-proxy` (ip6 for IPv6): the dispatch on service-ips and
// service-nodeports, the service's cluster IP in the verdict map going to
// a chain named after the service port, and that chain picking an endpoint
// from a shared map.
func testNFTListing(t *testing.T, m *modeEnv) {
	svc := m.EchoService(t, "listing", m.Topo.Pods...)
	suffix := "-" + m.Namespace + ".listing.tcp.tcp"
	m.eachFamily(t, func(t *testing.T, f famView) {
		table := []string{"list", "table", f.nftFamily(), "kube-proxy"}
		var out string
		err := framework.WaitFor(converge, func() (bool, error) {
			out = nodeNFT(t, m, table...)
			return nftChain(out, suffix) != "", nil
		})
		if err != nil {
			t.Fatalf("nft %s never declared a chain service-*%s:\n%s", strings.Join(table, " "), suffix, out)
		}
		for _, want := range []string{
			f.nftFamily() + " daddr . meta l4proto . th dport vmap @service-ips",
			"meta l4proto . th dport vmap @service-nodeports",
			f.clusterIP(t, svc) + " . tcp . 80 : goto service-",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("nft %s: no %q", strings.Join(table, " "), want)
			}
		}
		chain := nftChain(out, suffix)
		if !strings.HasPrefix(chain, "chain service-") || !strings.Contains(chain, "to numgen random mod 65536") ||
			!strings.Contains(chain, "map @endpoints-") {
			t.Errorf("service chain: want a to numgen random mod 65536 over an endpoints map:\n%s", chain)
		}
		t.Logf("the service's chain:\n%s", chain)
		t.Logf("nft list chain %s kube-proxy services:\n%s", f.nftFamily(), nodeNFT(t, m, "list", "chain", f.nftFamily(), "kube-proxy", "services"))
	})
}

// nftChain returns the block of the chain whose name ends in suffix, from
// its "chain" line to its closing brace, or "".
func nftChain(listing, suffix string) string {
	var block []string
	for _, line := range strings.Split(listing, "\n") {
		f := strings.Fields(line)
		if block == nil && len(f) == 3 && f[0] == "chain" && strings.HasSuffix(f[1], suffix) && f[2] == "{" {
			block = []string{}
		}
		if block == nil {
			continue
		}
		block = append(block, strings.TrimSpace(line))
		if strings.TrimSpace(line) == "}" {
			return strings.Join(block, "\n")
		}
	}
	return ""
}

// checkNoNFTFor checks that no chain of the family's table names the
// services.
func checkNoNFTFor(t *testing.T, f famView, names ...string) {
	t.Helper()
	out := nodeNFT(t, f.modeEnv, "list", "table", f.nftFamily(), "kube-proxy")
	for _, name := range names {
		if strings.Contains(out, f.Namespace+"/"+name+"/") {
			t.Errorf("nft table %s kube-proxy mentions %s/%s", f.nftFamily(), f.Namespace, name)
		}
	}
}

// foreignNFTTable stands for another program's nftables table on the
// node; --cleanup must leave it alone.
const foreignNFTTable = "switchyard-e2e-foreign"

// addForeignNFTTable installs foreignNFTTable (inet, with a chain and a
// rule) in the node namespace.
func addForeignNFTTable(t *testing.T, m *modeEnv) {
	t.Helper()
	nodeNFT(t, m, "add", "table", "inet", foreignNFTTable)
	nodeNFT(t, m, "add", "chain", "inet", foreignNFTTable, "input", "{ type filter hook input priority 0; policy accept; }")
	nodeNFT(t, m, "add", "rule", "inet", foreignNFTTable, "input", "tcp", "dport", "9", "accept")
}

// checkNFTCleanedUp: after --cleanup no kube-proxy table is left in any
// family, and the foreign table is still there with its rule.
func checkNFTCleanedUp(t *testing.T, m *modeEnv) {
	t.Helper()
	tables := nodeNFT(t, m, "list", "tables")
	if strings.Contains(tables, "kube-proxy") {
		t.Errorf("nft tables after --cleanup:\n%s", tables)
	}
	if !strings.Contains(tables, "table inet "+foreignNFTTable) {
		t.Fatalf("--cleanup removed another program's table %s:\n%s", foreignNFTTable, tables)
	}
	if out := nodeNFT(t, m, "list", "chain", "inet", foreignNFTTable, "input"); !strings.Contains(out, "tcp dport 9 accept") {
		t.Errorf("--cleanup changed another program's table:\n%s", out)
	}
}
