package nftables_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/nftables"
	"github.com/switchyard-proxy/switchyard/backends/nftables/nftablestest"
	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// TestKernelRejectsWhatTheFakeRejects replays the fake's rejection cases
// against the kernel through netlink: each Setup must commit, each Bad
// transaction must fail and leave the rule and element counts as they
// were.
func TestKernelRejectsWhatTheFakeRejects(t *testing.T) {
	kerneltest.Require(t)
	for _, r := range nftablestest.Rejections() {
		t.Run(r.Name, func(t *testing.T) {
			ns := kerneltest.NewNetns(t, "nftrej")
			err := kerneltest.InNetns(ns, func() error {
				conn, ctx := nftables.NewNetlinkConn(), context.Background()
				setup := ruleset.NewTransaction(ruleset.IPv4, "t")
				r.Setup(setup)
				if err := conn.Run(ctx, setup); err != nil {
					t.Errorf("setup: %v", err)
					return nil
				}
				before, _ := conn.Counts(ctx, ruleset.IPv4, "t")
				bad := ruleset.NewTransaction(ruleset.IPv4, "t")
				r.Bad(bad)
				if err := conn.Run(ctx, bad); err == nil {
					t.Errorf("the kernel accepted it")
				} else if !strings.Contains(err.Error(), "rejected the transaction: ") || !strings.Contains(err.Error(), `"`) {
					t.Errorf("the error does not name the object the kernel refused: %v", err)
				} else {
					t.Logf("kernel: %v", err)
				}
				after, err := conn.Counts(ctx, ruleset.IPv4, "t")
				if err != nil {
					return err
				}
				if !equalCounts(before, after) {
					t.Errorf("counts changed: %v -> %v", before, after)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func equalCounts(a, b nftables.TableCounts) bool {
	if len(a.Rules) != len(b.Rules) || len(a.Elements) != len(b.Elements) {
		return false
	}
	for k, v := range a.Rules {
		if b.Rules[k] != v {
			return false
		}
	}
	for k, v := range a.Elements {
		if b.Elements[k] != v {
			return false
		}
	}
	return true
}
