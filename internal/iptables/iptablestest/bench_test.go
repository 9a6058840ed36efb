package iptablestest

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// bigPayload renders a kube-proxy-shaped nat table: services x endpoints.
func bigPayload(services, endpoints int) string {
	var decl, rules strings.Builder
	decl.WriteString("*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n")
	rules.WriteString("-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n-A PREROUTING -j KUBE-SERVICES\n")
	for s := 0; s < services; s++ {
		svc := fmt.Sprintf("KUBE-SVC-%07d", s)
		fmt.Fprintf(&decl, ":%s - [0:0]\n", svc)
		fmt.Fprintf(&rules, "-A KUBE-SERVICES -m comment --comment \"ns/svc%d:p cluster IP\" -d 10.96.%d.%d -p tcp -m tcp --dport 80 -j %s\n", s, s/250, s%250, svc)
		for e := 0; e < endpoints; e++ {
			sep := fmt.Sprintf("KUBE-SEP-%07d-%02d", s, e)
			fmt.Fprintf(&decl, ":%s - [0:0]\n", sep)
			fmt.Fprintf(&rules, "-A %s -m statistic --mode random --probability %.10f -j %s\n", svc, 1/float64(endpoints-e), sep)
			fmt.Fprintf(&rules, "-A %s -s 10.244.%d.%d -j KUBE-MARK-MASQ\n", sep, e, s%250)
			fmt.Fprintf(&rules, "-A %s -p tcp -m tcp -j DNAT --to-destination 10.244.%d.%d:8080\n", sep, e, s%250)
		}
	}
	return decl.String() + rules.String() + "COMMIT\n"
}

func BenchmarkRestoreAndTrace(b *testing.B) {
	data := []byte(bigPayload(2000, 10))
	for b.Loop() {
		f := NewFake()
		if err := f.Restore(context.Background(), runner.IPv4, data); err != nil {
			b.Fatal(err)
		}
		res, err := f.Trace(runner.IPv4, Packet{SrcIP: netip.MustParseAddr("10.244.9.9"), DstIP: netip.MustParseAddr("10.96.7.249"), DstPort: 80})
		if err != nil || len(res.Endpoints) != 10 {
			b.Fatalf("trace: %v %v", res.Endpoints, err)
		}
	}
}
