package iptables

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// TestReferencedStaleChainDoesNotBlockSync: an operator's rule jumping to
// a KUBE-SEP chain makes its deletion fail when the endpoint goes. The
// failure is counted, but the service's new rules are applied anyway
// (the endpoint gets no more traffic), the chain is kept, and once the
// foreign rule is gone the next full sync deletes it. The same with the
// payloads streamed (the failed one is rendered again to find the lines
// iptables blamed).
func TestReferencedStaleChainDoesNotBlockSync(t *testing.T) {
	for _, streamed := range []bool{false, true} {
		t.Run(map[bool]string{false: "buffered", true: "streamed"}[streamed], func(t *testing.T) {
			testReferencedStaleChain(t, streamed)
		})
	}
}

func testReferencedStaleChain(t *testing.T, streamed bool) {
	fake := iptablestest.NewFake()
	reg := metrics.New(nil)
	b := newTestBackend(t, fake, func(c *Config) {
		c.Metrics = reg
		if streamed {
			c.Runner = &streamingFake{Fake: fake}
		}
	})
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	gone := endpointChainName(names[0], "10.244.3.1:80")
	foreign := []string{"-d", "192.0.2.1/32", "-j", gone}
	if _, err := fake.EnsureRule(runner.IPv4, runner.Append, "nat", "OUTPUT", foreign...); err != nil {
		t.Fatal(err)
	}

	st = cloneState(st)
	st.Endpoints[names[0]] = st.Endpoints[names[0]][:2]
	if _, err := b.Sync(context.Background(), st, changedDiff(false, names[0])); err != nil {
		t.Fatalf("sync blocked by a chain it could not delete: %v", err)
	}
	res, err := fake.Trace(runner.IPv4, iptablestest.Packet{SrcIP: netip.MustParseAddr("10.244.9.9"),
		DstIP: netip.MustParseAddr("10.96.1.1"), DstPort: 80})
	if err != nil || slices.Contains(res.Endpoints, "10.244.3.1:80") || len(res.Endpoints) != 2 {
		t.Errorf("after the endpoint left, the service reaches %v (err %v)", res.Endpoints, err)
	}
	if ok, _ := fake.ChainExists(runner.IPv4, "nat", gone); !ok {
		t.Errorf("referenced chain %s was deleted", gone)
	}
	if got := metricValue(reg.IPTablesRestoreFailuresTotal.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("restore failures = %v, want 1", got)
	}

	if err := fake.DeleteRule(runner.IPv4, "nat", "OUTPUT", foreign...); err != nil {
		t.Fatal(err)
	}
	mustSync(t, b, st, fullDiff())
	assertMatchesReference(t, fake, nil, st)
}
