package nftables_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// TestKernelReadTable: the table a full sync of the flow fixture writes
// into the kernel, read back with ReadTable (what `switchyard explain`
// traces), dumps exactly as the fake's copy of it, every rule decoded,
// under every local-traffic detector; and reading changes nothing (the
// ruleset's generation stays).
func TestKernelReadTable(t *testing.T) {
	kerneltest.Require(t)
	for _, v := range flowtest.Variants() {
		t.Run(v.Name, func(t *testing.T) {
			state, node := flowtest.FixtureFor(v)
			ns := kerneltest.NewNetns(t, "nftread")
			kernelSync(t, ns, kernelBackend(t, node), state, fullDiff())
			fake := nftablestest.NewFake()
			mustSync(t, flowBackend(t, fake, node), state, fullDiff())
			for _, fam := range []ruleset.Family{ruleset.IPv4, ruleset.IPv6} {
				var got *ruleset.Table
				var before, after uint32
				err := kerneltest.InNetns(ns, func() (err error) {
					conn := nftables.NewNetlinkConn()
					if before, err = conn.Generation(context.Background()); err != nil {
						return err
					}
					if got, _, err = conn.ReadTable(context.Background(), fam, nftables.TableName); err != nil {
						return err
					}
					after, err = conn.Generation(context.Background())
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if before != after {
					t.Errorf("%s: reading changed the ruleset's generation from %d to %d", fam, before, after)
				}
				want := fake.Table(fam, nftables.TableName)
				if d := cmp.Diff(want.Dump(), got.Dump()); d != "" {
					t.Errorf("%s: read back differs from what was written (-written +read):\n%s", fam, d)
				}
			}
		})
	}
}
