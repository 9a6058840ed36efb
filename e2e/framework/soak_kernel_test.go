package framework

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// kernelCountCases are hand-written tables in each proxy's layout and what
// ReadKernelCounts must count in them.
var kernelCountCases = []struct {
	proxy, mode, ruleset string
	want                 KernelCounts
}{{
	// Two ports with endpoints: one DNATs straight from an anonymous map,
	// one goes to endpoint chains (as with ClientIP affinity); a flushed,
	// unreferenced endpoint chain waits for deletion; a port without
	// endpoints is only in no-endpoint-services.
	proxy: "kube-proxy", mode: "nftables", want: KernelCounts{Services: 2, Endpoints: 5},
	ruleset: `table ip kube-proxy {
 map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
 map no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict; }
 chain reject-chain { reject; }
 chain endpoint-AAA-ns/b/tcp/p__10.0.1.1/80 { meta l4proto tcp dnat ip to 10.0.1.1:80; }
 chain endpoint-BBB-ns/b/tcp/p__10.0.1.2/80 { meta l4proto tcp dnat ip to 10.0.1.2:80; }
 chain endpoint-CCC-ns/b/tcp/p__10.0.1.3/80 { }
 chain service-A-ns/a/tcp/p { meta l4proto tcp dnat ip to numgen random mod 3 map { 0 : 10.0.0.1 . 80, 1 : 10.0.0.2 . 80, 2 : 10.0.0.3 . 80 }; }
 chain service-B-ns/b/tcp/p { numgen random mod 2 vmap { 0 : goto endpoint-AAA-ns/b/tcp/p__10.0.1.1/80, 1 : goto endpoint-BBB-ns/b/tcp/p__10.0.1.2/80 }; }
}
add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto service-A-ns/a/tcp/p, 10.96.0.2 . tcp . 80 : goto service-B-ns/b/tcp/p }
add element ip kube-proxy no-endpoint-services { 10.96.0.3 . tcp . 80 : goto reject-chain }
`,
}, {
	// Three ports, one without endpoints; four endpoint ranges over two
	// interval maps.
	proxy: "switchyard", mode: "nftables", want: KernelCounts{Services: 2, Endpoints: 4},
	ruleset: `table ip kube-proxy {
 chain service-a { }
 map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }
 set services-without-endpoints { type ipv4_addr . inet_proto . inet_service; }
 map endpoints-0 { type inet_service : ipv4_addr; flags interval; }
 map endpoints-1 { type inet_service : ipv4_addr; flags interval; }
}
add element ip kube-proxy service-ips { 10.96.0.1 . tcp . 80 : goto service-a, 10.96.0.2 . tcp . 80 : goto service-a, 10.96.0.3 . tcp . 80 : goto service-a }
add element ip kube-proxy services-without-endpoints { 10.96.0.3 . tcp . 80 }
add element ip kube-proxy endpoints-0 { 0-99 : 10.0.0.1, 100-199 : 10.0.0.2, 200-299 : 10.0.0.3 }
add element ip kube-proxy endpoints-1 { 0-65535 : 10.0.1.1 }
`,
}}

// manyServiceChains is kube-proxy's layout with n service chains, each
// drawing from an anonymous map of 3 endpoints: more than spotChecks, so
// most count by their declared size.
func manyServiceChains(n int) string {
	var b strings.Builder
	b.WriteString("table ip kube-proxy {\n map service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }\n")
	for i := range n {
		fmt.Fprintf(&b, " chain service-%d { meta l4proto tcp dnat ip to numgen random mod 3 map { 0 : 10.1.%d.1 . 80, 1 : 10.1.%d.2 . 80, 2 : 10.1.%d.3 . 80 }; }\n", i, i, i, i)
	}
	b.WriteString("}\n")
	for i := range n {
		fmt.Fprintf(&b, "add element ip kube-proxy service-ips { 10.96.1.%d . tcp . 80 : goto service-%d }\n", i, i)
	}
	return b.String()
}

func TestReadKernelCounts(t *testing.T) {
	kerneltest.Require(t)
	cases := append(kernelCountCases, struct {
		proxy, mode, ruleset string
		want                 KernelCounts
	}{"kube-proxy", "nftables", manyServiceChains(100), KernelCounts{Services: 100, Endpoints: 300}})
	for _, c := range cases {
		t.Run(c.proxy+"-"+c.mode, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "sykc")
			cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
			cmd.Stdin = strings.NewReader(c.ruleset)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("nft -f: %v\n%s", err, out)
			}
			checkKernelCounts(t, ns, c.proxy, c.mode, c.want)
		})
	}
}

// TestReadKernelCountsIPTables: one service chain in use, two endpoint
// chains in use, one flushed and unreferenced.
func TestReadKernelCountsIPTables(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "sykc")
	cmd := exec.Command("ip", "netns", "exec", ns, "iptables-nft-restore")
	cmd.Stdin = strings.NewReader(`*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAA - [0:0]
:KUBE-SEP-1111 - [0:0]
:KUBE-SEP-2222 - [0:0]
:KUBE-SEP-3333 - [0:0]
-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp --dport 80 -j KUBE-SVC-AAAA
-A KUBE-SVC-AAAA -m statistic --mode random --probability 0.5 -j KUBE-SEP-1111
-A KUBE-SVC-AAAA -j KUBE-SEP-2222
-A KUBE-SEP-1111 -p tcp -j DNAT --to-destination 10.0.0.1:80
-A KUBE-SEP-2222 -p tcp -j DNAT --to-destination 10.0.0.2:80
COMMIT
`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("iptables-nft-restore: %v\n%s", err, out)
	}
	checkKernelCounts(t, ns, "switchyard", "iptables", KernelCounts{Services: 1, Endpoints: 2})
}

func checkKernelCounts(t *testing.T, ns, proxy, mode string, want KernelCounts) {
	t.Helper()
	layout, err := KernelLayoutFor(proxy, mode)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadKernelCounts(ns, layout)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("%s %s: counted %+v, want %+v", proxy, mode, got, want)
	}
}

func TestKernelLayoutFor(t *testing.T) {
	for _, bad := range [][2]string{{"switchyard", "ipvs"}, {"other", "nftables"}, {"kube-proxy", ""}} {
		if _, err := KernelLayoutFor(bad[0], bad[1]); err == nil {
			t.Errorf("a layout for %s in %q", bad[0], bad[1])
		}
	}
}
