package sweep

import (
	"fmt"
	"strings"
	"testing"
)

// bigOwnedSave is nat as iptables-save prints it after a first sync of
// 10k services x 10 endpoints: ~130k chains, ~320k rules, all owned by
// the running mode, plus one leftover chain with a jump to it.
func bigOwnedSave(services, eps int) []byte {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n:KUBE-PORTALS-HOST - [0:0]\n")
	for i := 0; i < services; i++ {
		fmt.Fprintf(&b, ":KUBE-SVC-%016d - [0:0]\n", i)
		for j := 0; j < eps; j++ {
			fmt.Fprintf(&b, ":KUBE-SEP-%08d%08d - [0:0]\n", i, j)
		}
	}
	b.WriteString("-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n")
	b.WriteString("-A PREROUTING -j KUBE-PORTALS-HOST\n")
	for i := 0; i < services; i++ {
		fmt.Fprintf(&b, "-A KUBE-SERVICES -d 10.96.%d.%d/32 -p tcp -m comment --comment \"ns/svc-%d:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-%016d\n", i>>8, i&255, i, i)
		for j := 0; j < eps; j++ {
			fmt.Fprintf(&b, "-A KUBE-SVC-%016d -m comment --comment \"ns/svc-%d:http -> 10.64.%d.%d:8080\" -m statistic --mode random --probability 0.1000000000 -j KUBE-SEP-%08d%08d\n", i, i, i>>8, j, i, j)
			fmt.Fprintf(&b, "-A KUBE-SEP-%08d%08d -s 10.64.%d.%d/32 -m comment --comment \"ns/svc-%d:http\" -j KUBE-MARK-MASQ\n", i, j, i>>8, j, i)
			fmt.Fprintf(&b, "-A KUBE-SEP-%08d%08d -p tcp -m comment --comment \"ns/svc-%d:http\" -m tcp -j DNAT --to-destination 10.64.%d.%d:8080\n", i, j, i, i>>8, j)
		}
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}

// BenchmarkPlanOwnBigTable plans the sweep of a big table holding only
// the running mode's chains and one leftover (the takeover check right
// after a first sync at 10k services x 10 endpoints).
func BenchmarkPlanOwnBigTable(b *testing.B) {
	save := bigOwnedSave(10000, 10)
	owned := func(_, chain string) bool { return chain != "KUBE-PORTALS-HOST" }
	b.ReportMetric(float64(len(save)), "save-bytes")
	b.ReportAllocs()
	for b.Loop() {
		if _, res := Plan("nat", save, owned); len(res.Deleted) != 1 || res.Jumps != 1 {
			b.Fatalf("plan: %+v", res)
		}
	}
}
