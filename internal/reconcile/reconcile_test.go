package reconcile

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/switchyard-proxy/switchyard/proxier"
)

func TestCadence(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	last := clk.Now()
	c := NewCadence(0, clk)
	if c.Interval() != DefaultVerifyInterval {
		t.Errorf("interval %v, want the default %v", c.Interval(), DefaultVerifyInterval)
	}
	partial, periodic := &proxier.Diff{}, &proxier.Diff{Verify: true}
	if c.Due(partial, last) || !c.Due(periodic, last) {
		t.Error("right after a check: only the periodic sync verifies")
	}
	clk.SetTime(last.Add(DefaultVerifyInterval))
	if !c.Due(partial, last) {
		t.Error("a partial sync an interval after the last check does not verify")
	}
	never := NewCadence(-1, clk)
	if never.Due(periodic, time.Time{}) {
		t.Error("a negative interval verifies")
	}
}

// TestRepairs: the series start at zero per family, a second mode's
// Repairs shares the registered counter, a nil registerer still counts.
func TestRepairs(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	ipt, err := NewRepairs(reg, "iptables", []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol})
	if err != nil {
		t.Fatal(err)
	}
	ipvs, err := NewRepairs(reg, "ipvs", []v1.IPFamily{v1.IPv4Protocol})
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "switchyard_rules_repaired_total"); n != 3 {
		t.Errorf("%d series at start, want 3 (iptables per family, ipvs IPv4)", n)
	}
	ipt.Record(KindIPTables, v1.IPv6Protocol)
	ipvs.Record(KindIPSet, v1.IPv4Protocol)
	ipvs.Record(KindIPSet, v1.IPv4Protocol)
	if ipt.Count(KindIPTables, v1.IPv6Protocol) != 1 || ipvs.Count(KindIPSet, v1.IPv4Protocol) != 2 || ipt.Count(KindIPTables, v1.IPv4Protocol) != 0 {
		t.Error("counts do not add up")
	}
	loose, err := NewRepairs(nil, "nftables", nil)
	if err != nil {
		t.Fatal(err)
	}
	loose.Record(KindNFTables, v1.IPv4Protocol)
	if loose.Count(KindNFTables, v1.IPv4Protocol) != 1 {
		t.Error("an unregistered Repairs does not count")
	}
	var none *Repairs
	none.Record(KindNFTables, v1.IPv4Protocol) // no panic
}
