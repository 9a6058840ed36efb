package nftables_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// kernelSync syncs st into the namespace through netlink.
func kernelSync(t *testing.T, ns string, b *nftables.Backend, st *proxier.State, d *proxier.Diff) {
	t.Helper()
	err := kerneltest.InNetns(ns, func() error {
		_, err := syncTracked(b, st, d)
		return err
	})
	if err != nil {
		t.Fatalf("sync in %s: %v", ns, err)
	}
}

func kernelBackend(t testing.TB, node flowtest.NodeConfig) *nftables.Backend {
	t.Helper()
	b, err := nftables.New(nftables.Config{
		Families:      []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
		LocalDetector: node.LocalDetector,
		Conn:          nftables.NewNetlinkConn(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKernelFixtureMatchesFake writes the flow fixture into a real kernel
// and into the fake, then compares what the kernel holds (rules per
// chain, elements per set) with the fake, and has nft read it back: the
// first sync in one transaction, and cut into one per service port.
func TestKernelFixtureMatchesFake(t *testing.T) {
	kerneltest.Require(t)
	for _, tc := range []struct {
		name  string
		chunk int
	}{{"one transaction", 1 << 20}, {"a transaction per port", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			defer nftables.SetChunkObjects(tc.chunk)()
			kernelFixtureMatchesFake(t)
		})
	}
}

func kernelFixtureMatchesFake(t *testing.T) {
	ns := kerneltest.NewNetns(t, "nftfix")
	state, node := flowtest.Fixture()
	kernelSync(t, ns, kernelBackend(t, node), state, fullDiff())
	fake := nftablestest.NewFake()
	mustSync(t, flowBackend(t, fake, node), state, fullDiff())
	checkKernelCounts(t, ns, fake)
	for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
		out := kerneltest.Run(t, "ip", "netns", "exec", ns, "nft", "list", "table", string(fam), nftables.TableName)
		for _, s := range []string{"chain services", "vmap @service-ips", "map endpoints-0"} {
			if !strings.Contains(out, s) {
				t.Errorf("nft list table %s: no %q in:\n%s", fam, s, out)
			}
		}
		t.Logf("nft list table %s %s:\n%s", fam, nftables.TableName, out)
		// kube-proxy (knftables) reads tables as JSON: the element tags,
		// which nft does not know, must not break it.
		js := kerneltest.Run(t, "ip", "netns", "exec", ns, "nft", "-j", "list", "table", string(fam), nftables.TableName)
		if !strings.Contains(js, `"goto"`) || !strings.Contains(js, `"service-ips"`) {
			t.Errorf("nft -j list table %s: no service-ips goto in:\n%s", fam, js)
		}
	}
}

// checkKernelCounts compares what the kernel holds in the namespace
// (rules per chain, elements per set) with what the fake holds.
func checkKernelCounts(t *testing.T, ns string, fake *nftablestest.Fake) {
	t.Helper()
	for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
		var got nftables.TableCounts
		err := kerneltest.InNetns(ns, func() (err error) {
			got, err = nftables.NewNetlinkConn().Counts(context.Background(), fam, nftables.TableName)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := fake.Counts(context.Background(), fam, nftables.TableName)
		if !maps.Equal(got.Rules, want.Rules) || !maps.Equal(got.Elements, want.Elements) {
			t.Errorf("%s: kernel holds %v / %v, fake %v / %v", fam, got.Rules, got.Elements, want.Rules, want.Elements)
		}
	}
}
