package nftablestest

import (
	"context"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/nftables/ruleset"
)

// TestFakeRejects: every transaction of Rejections fails in the fake and
// leaves the table as Setup made it.
func TestFakeRejects(t *testing.T) {
	for _, r := range Rejections() {
		t.Run(r.Name, func(t *testing.T) {
			f := NewFake()
			setup := ruleset.NewTransaction(ruleset.IPv4, "t")
			r.Setup(setup)
			if err := f.Run(context.Background(), setup); err != nil {
				t.Fatalf("setup: %v", err)
			}
			before := f.Dump(ruleset.IPv4, "t")
			bad := ruleset.NewTransaction(ruleset.IPv4, "t")
			r.Bad(bad)
			if err := f.Run(context.Background(), bad); err == nil {
				t.Fatalf("the fake accepted it")
			}
			if after := f.Dump(ruleset.IPv4, "t"); after != before {
				t.Errorf("a rejected transaction changed the table:\n%s", after)
			}
		})
	}
}
