package nftables_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	gnft "github.com/google/nftables"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// kubeProxyFirstSync is the object part of upstream kube-proxy's first
// nftables transaction (v1.37.1, setupNFTables) in nft syntax: the table
// with its comment, every base chain added and deleted, then recreated,
// its regular chains added and flushed, its sets and maps added. The kernel
// refuses the whole transaction if any add meets an object of the same
// name and another type.
func kubeProxyFirstSync(fam ruleset.Family) string {
	addr := "ipv4_addr"
	if fam == ruleset.IPv6 {
		addr = "ipv6_addr"
	}
	t := string(fam) + " " + nftables.TableName
	var b strings.Builder
	fmt.Fprintf(&b, "add table %s { comment \"rules for kube-proxy\" ; }\n", t)
	for name := range upstreamBaseChains {
		fmt.Fprintf(&b, "add chain %s %s\ndelete chain %s %s\n", t, name, t, name)
	}
	for name, h := range upstreamBaseChains {
		fmt.Fprintf(&b, "add chain %s %s { type %s hook %s priority %d ; }\nflush chain %s %s\n", t, name, h.Type, h.Hook, h.Priority, t, name)
	}
	for name := range upstreamChains {
		fmt.Fprintf(&b, "add chain %s %s\nflush chain %s %s\n", t, name, t, name)
	}
	for name, typ := range upstreamSets[fam] {
		kind := "set"
		if strings.HasSuffix(typ, ": verdict") {
			kind = "map"
		}
		fmt.Fprintf(&b, "add %s %s %s { %s ; }\n", kind, t, name, strings.ReplaceAll(typ, "ipv4_addr", addr))
	}
	return b.String()
}

// TestKernelKubeProxyAdoptsTable writes the flow fixture into a real
// kernel, then runs what kube-proxy's nftables mode does first over it (a
// rollback): the transaction must be accepted, and afterwards no base chain
// may reach one of switchyard's chains, so what is left of switchyard's can
// be deleted in one transaction (after kube-proxy reconciled the maps it
// shares: service-ips, service-nodeports, firewall-ips).
func TestKernelKubeProxyAdoptsTable(t *testing.T) {
	kerneltest.Require(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	ns := kerneltest.NewNetns(t, "nftadopt")
	state, node := flowtest.Fixture()
	kernelSync(t, ns, kernelBackend(t, node), state, fullDiff())
	for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
		nftScript(t, ns, kubeProxyFirstSync(fam))
		t.Logf("%s: kube-proxy's first transaction accepted", fam)
		tbl := string(fam) + " " + nftables.TableName
		var del strings.Builder
		for _, m := range []string{"service-ips", "service-nodeports", "firewall-ips"} {
			fmt.Fprintf(&del, "flush map %s %s\n", tbl, m)
		}
		listed := kerneltest.Run(t, "ip", "netns", "exec", ns, "nft", "list", "table", string(fam), nftables.TableName)
		chains, sets := switchyardObjects(listed)
		for _, c := range chains {
			fmt.Fprintf(&del, "flush chain %s %s\n", tbl, c)
		}
		for _, c := range chains {
			fmt.Fprintf(&del, "delete chain %s %s\n", tbl, c)
		}
		for _, s := range sets {
			fmt.Fprintf(&del, "delete %s %s %s\n", s[0], tbl, s[1])
		}
		nftScript(t, ns, del.String())
		t.Logf("%s: switchyard's %d chains and %d sets deleted after the adoption", fam, len(chains), len(sets))
	}
}

// switchyardObjects lists switchyard's chains and sets ({kind, name}) in
// nft's listing of a table.
func switchyardObjects(listed string) (chains []string, sets [][2]string) {
	for _, l := range strings.Split(listed, "\n") {
		f := strings.Fields(l)
		if len(f) < 3 || !nftables.SwitchyardObject(f[1]) {
			continue
		}
		switch f[0] {
		case "chain":
			chains = append(chains, f[1])
		case "set", "map":
			sets = append(sets, [2]string{f[0], f[1]})
		}
	}
	return chains, sets
}

func nftScript(t *testing.T, ns, script string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f: %v\n%s\nscript:\n%s", err, out, script)
	}
}

// TestKernelReplacesAnEarlierTable: earlier versions named the pre-DNAT
// filter chain "filter-prerouting", put slashes in chain names and flagged
// service-ips as a concatenation (nft never does without an interval, and
// the kernel refuses an add of an existing set whose flags differ, so a
// rewrite in place would fail). The first full sync over such a table
// replaces it, after which kube-proxy's first transaction is accepted.
func TestKernelReplacesAnEarlierTable(t *testing.T) {
	kerneltest.Require(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("no nft")
	}
	ns := kerneltest.NewNetns(t, "nftupg")
	err := kerneltest.InNetns(ns, func() error {
		c, err := gnft.New()
		if err != nil {
			return err
		}
		tbl := c.AddTable(&gnft.Table{Family: gnft.TableFamilyIPv4, Name: nftables.TableName})
		c.AddChain(&gnft.Chain{Table: tbl, Name: "filter-prerouting", Type: gnft.ChainTypeFilter,
			Hooknum: gnft.ChainHookPrerouting, Priority: gnft.ChainPriorityRef(-110)})
		c.AddChain(&gnft.Chain{Table: tbl, Name: "service-SUSTUHLJ-default/web/tcp/http"})
		key := gnft.MustConcatSetType(gnft.TypeIPAddr, gnft.TypeInetProto, gnft.TypeInetService)
		s := &gnft.Set{Table: tbl, Name: "service-ips", IsMap: true, Concatenation: true, KeyType: key, DataType: gnft.TypeVerdict}
		if err := c.AddSet(s, nil); err != nil {
			return err
		}
		return c.Flush()
	})
	if err != nil {
		t.Fatalf("creating an earlier version's table: %v", err)
	}
	state, node := flowtest.Fixture()
	kernelSync(t, ns, kernelBackend(t, node), state, fullDiff())
	listed := kerneltest.Run(t, "ip", "netns", "exec", ns, "nft", "list", "table", "ip", nftables.TableName)
	for _, old := range []string{"chain filter-prerouting {", "default/web/tcp/http"} {
		if strings.Contains(listed, old) {
			t.Errorf("%q survived the first sync:\n%s", old, listed)
		}
	}
	nftScript(t, ns, kubeProxyFirstSync(ruleset.IPv4))
}
