package sweep

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// kubeProxyIPTables is what kube-proxy's iptables mode leaves for one
// service with one endpoint, with kubelet's chains and another program's
// chain beside it.
const kubeProxyIPTables = `*mangle
:KUBE-IPTABLES-HINT - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*filter
:KUBE-FIREWALL - [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:CNI-FORWARD - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -j KUBE-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -j CNI-FORWARD
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -j KUBE-FIREWALL
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
COMMIT
*nat
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SVC-ABCDEFGHIJKLMNOP - [0:0]
:KUBE-SEP-ABCDEFGHIJKLMNOP - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "ns/svc:p cluster IP" -m tcp --dport 80 -j KUBE-SVC-ABCDEFGHIJKLMNOP
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-ABCDEFGHIJKLMNOP -m comment --comment "ns/svc:p -> 10.0.0.2:8080" -j KUBE-SEP-ABCDEFGHIJKLMNOP
-A KUBE-SEP-ABCDEFGHIJKLMNOP -s 10.0.0.2/32 -m comment --comment "ns/svc:p" -j KUBE-MARK-MASQ
-A KUBE-SEP-ABCDEFGHIJKLMNOP -p tcp -m comment --comment "ns/svc:p" -m tcp -j DNAT --to-destination 10.0.0.2:8080
COMMIT
`

func seeded(t *testing.T, payload string) *iptablestest.Fake {
	t.Helper()
	f := iptablestest.NewFake()
	if err := f.Restore(context.Background(), runner.IPv4, []byte(payload)); err != nil {
		t.Fatalf("seeding the fake: %v", err)
	}
	return f
}

func TestRunRemovesEveryProxyChain(t *testing.T) {
	f := seeded(t, kubeProxyIPTables)
	res, err := Run(context.Background(), f, runner.IPv4, nil) // the nftables mode owns no chain
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Chains(), 14; got != want {
		t.Errorf("removed %d chains, want %d: %+v", got, want, res.Tables)
	}
	if got, want := res.Jumps(), 9; got != want {
		t.Errorf("removed %d jumps, want %d", got, want)
	}
	want := map[string][]string{
		"mangle": {"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"},
		"filter": {"CNI-FORWARD", "KUBE-FIREWALL", "KUBE-KUBELET-CANARY"},
		"nat":    {"KUBE-KUBELET-CANARY"},
	}
	for table, chains := range want {
		got := userChains(f, table)
		if !slices.Equal(got, chains) {
			t.Errorf("%s after the sweep: %v, want %v", table, got, chains)
		}
	}
	filter := f.Dump(runner.IPv4, "filter")
	for _, rule := range []string{"-A INPUT -j KUBE-FIREWALL", "-A FORWARD -j CNI-FORWARD", "block incoming localnet"} {
		if !strings.Contains(filter, rule) {
			t.Errorf("filter lost %q:\n%s", rule, filter)
		}
	}
	if nat := f.Dump(runner.IPv4, "nat"); strings.Contains(nat, "KUBE-SERVICES") {
		t.Errorf("nat still jumps to KUBE-SERVICES:\n%s", nat)
	}
}

func TestRunKeepsTheSuccessorsChains(t *testing.T) {
	// An ipvs-mode successor owns these and has rewritten KUBE-SERVICES.
	f := seeded(t, kubeProxyIPTables+"*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n")
	ipvsOwns := func(table, chain string) bool {
		return slices.Contains([]string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-FORWARD"}, chain)
	}
	res, err := Run(context.Background(), f, runner.IPv4, ipvsOwns)
	if err != nil {
		t.Fatal(err)
	}
	nat := userChains(f, "nat")
	if want := []string{"KUBE-KUBELET-CANARY", "KUBE-MARK-MASQ", "KUBE-POSTROUTING", "KUBE-SERVICES"}; !slices.Equal(nat, want) {
		t.Errorf("nat after the sweep: %v, want %v", nat, want)
	}
	if d := f.Dump(runner.IPv4, "nat"); !strings.Contains(d, "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES") {
		t.Errorf("the successor's jump went:\n%s", d)
	}
	if res.Jumps() != 3 { // filter INPUT's; the jumps to the owned chains stay
		t.Errorf("removed %d jumps, want 3", res.Jumps())
	}
}

func TestRunKeepsWhatAForeignChainEnters(t *testing.T) {
	f := seeded(t, kubeProxyIPTables+`*nat
:MY-CHAIN - [0:0]
-A MY-CHAIN -j KUBE-SVC-ABCDEFGHIJKLMNOP
COMMIT
`)
	res, err := Run(context.Background(), f, runner.IPv4, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := res.Kept()
	slices.Sort(kept)
	if got, want := kept, []string{"nat/KUBE-MARK-MASQ", "nat/KUBE-SEP-ABCDEFGHIJKLMNOP", "nat/KUBE-SVC-ABCDEFGHIJKLMNOP"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	nat := userChains(f, "nat")
	if want := []string{"KUBE-KUBELET-CANARY", "KUBE-MARK-MASQ", "KUBE-SEP-ABCDEFGHIJKLMNOP", "KUBE-SVC-ABCDEFGHIJKLMNOP", "MY-CHAIN"}; !slices.Equal(nat, want) {
		t.Errorf("nat after the sweep: %v, want %v", nat, want)
	}
}

func TestRunNothingToDo(t *testing.T) {
	f := iptablestest.NewFake()
	res, err := Run(context.Background(), f, runner.IPv4, nil)
	if err != nil || res.Chains() != 0 || res.Jumps() != 0 {
		t.Fatalf("empty node: %+v, %v", res, err)
	}
	if n := len(f.Restores()); n != 0 {
		t.Errorf("%d restores on an empty node, want 0", n)
	}
}

func TestRunReportsAFailedTableAndGoesOn(t *testing.T) {
	f := seeded(t, kubeProxyIPTables)
	f.FailNextRestores(1) // mangle
	res, err := Run(context.Background(), f, runner.IPv4, nil)
	if err == nil {
		t.Fatal("no error for the failed mangle restore")
	}
	if got := res.Chains(); got != 13 {
		t.Errorf("removed %d chains of filter and nat, want 13", got)
	}
}

func TestKnown(t *testing.T) {
	for _, c := range []struct {
		table, chain string
		want         bool
	}{
		{"nat", "KUBE-SVC-ABC", true},
		{"nat", "KUBE-XLB-ABC", true},
		{"nat", "KUBE-SVC-", false},
		{"filter", "KUBE-SVC-ABC", false},
		{"filter", "KUBE-FIREWALL", false}, // kubelet's
		{"nat", "KUBE-FIREWALL", true},     // kube-proxy's old ipvs mode
		{"mangle", "KUBE-IPTABLES-HINT", false},
		{"nat", "KUBE-KUBELET-CANARY", false},
		{"nat", "KUBE-PORTALS-CONTAINER", true},
		{"filter", "KUBE-IPVS-OUT-FILTER", true},
	} {
		if got := Known(c.table, c.chain); got != c.want {
			t.Errorf("Known(%s, %s) = %v, want %v", c.table, c.chain, got, c.want)
		}
	}
}

// userChains are the table's chains that are not built in, sorted.
func userChains(f *iptablestest.Fake, table string) []string {
	var out []string
	for _, c := range f.Chains(runner.IPv4, table) {
		if !runner.IsBuiltinChain(c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
