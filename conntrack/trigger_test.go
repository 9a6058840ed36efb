package conntrack

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

// TestReconcilePasses checks when a pass over the table happens at all.
func TestReconcilePasses(t *testing.T) {
	tcp := &proxier.ServicePort{Name: portName("web", "http", v1.ProtocolTCP), Protocol: v1.ProtocolTCP,
		Port: 80, ClusterIPs: []netip.Addr{addr("10.96.0.80")}}
	newlyServing := emptyDiff()
	newlyServing.NewlyServing[dnsName] = struct{}{}
	deleted := emptyDiff()
	deleted.Deleted[dnsName] = dnsService()
	endpointAdded := emptyDiff()
	endpointAdded.Changed[dnsName] = struct{}{}
	cases := []struct {
		name string
		cfg  Config
		st   *proxier.State
		diff *proxier.Diff
		want map[v1.IPFamily]int // passes per family
	}{
		{"endpoint added: nothing can be stale", Config{}, state(dnsService(), eps(ready(epB))), endpointAdded, nil},
		{"TCP endpoint removed", Config{}, state(dnsService(), eps(ready(epB)), tcp, eps()), staleDiff(tcp.Name, epA), nil},
		{"full sync without UDP or SCTP services", Config{}, state(tcp, eps(ready(epA))), fullDiff(), nil},
		{"full sync", Config{}, state(dnsService(), eps(ready(epB))), fullDiff(), map[v1.IPFamily]int{v1.IPv4Protocol: 1}},
		{"nil diff counts as full", Config{}, state(dnsService(), eps(ready(epB))), nil, map[v1.IPFamily]int{v1.IPv4Protocol: 1}},
		{"UDP endpoint removed", Config{}, state(dnsService(), eps(ready(epB))), staleDiff(dnsName, epA), map[v1.IPFamily]int{v1.IPv4Protocol: 1}},
		{"newly serving", Config{}, state(dnsService(), eps(ready(epB))), newlyServing, map[v1.IPFamily]int{v1.IPv4Protocol: 1}},
		{"last UDP service deleted", Config{}, state(tcp, eps()), deleted, map[v1.IPFamily]int{v1.IPv4Protocol: 1}},
		{"only families with service addresses", Config{Families: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}},
			state(dnsService(), eps(ready(epB))), fullDiff(), map[v1.IPFamily]int{v1.IPv4Protocol: 1}},
		{"both families", Config{Families: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}},
			state(dualStackService(), eps(ready(epB))), fullDiff(), map[v1.IPFamily]int{v1.IPv4Protocol: 1, v1.IPv6Protocol: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := conntracktest.NewTable()
			if _, err := New(tb, tc.cfg, nil).Reconcile(context.Background(), tc.st, tc.diff); err != nil {
				t.Fatal(err)
			}
			for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				if got := tb.Passes(fam); got != tc.want[fam] {
					t.Errorf("%s passes = %d, want %d", fam, got, tc.want[fam])
				}
			}
		})
	}
}

// TestReconcileGoneAddress: an external IP removed from a service is only
// visible as a changed address set; its entries are deleted.
func TestReconcileGoneAddress(t *testing.T) {
	tb := conntracktest.NewTable()
	r := New(tb, Config{}, nil)
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, state(dnsService(), eps(ready(epA))), fullDiff()); err != nil {
		t.Fatal(err)
	}
	viaOld := udpVia(c(1), externalIP, 53, epA)
	viaCluster := udpVia(c(2), clusterIP, 53, epA)
	if err := tb.Add(viaOld, viaCluster); err != nil {
		t.Fatal(err)
	}
	sp := dnsService()
	sp.ExternalIPs = nil
	d := emptyDiff()
	d.Changed[dnsName], d.ServicesChanged = struct{}{}, true
	n, err := r.Reconcile(ctx, state(sp, eps(ready(epA))), d)
	if err != nil || n != 1 {
		t.Fatalf("Reconcile = %d, %v; want 1 deleted", n, err)
	}
	checkRemaining(t, tb, []conntracktest.Entry{viaCluster})
	// Nothing changed since: no pass.
	before := tb.Passes(v1.IPv4Protocol)
	if _, err := r.Reconcile(ctx, state(sp, eps(ready(epA))), emptyDiff()); err != nil {
		t.Fatal(err)
	}
	if got := tb.Passes(v1.IPv4Protocol); got != before {
		t.Errorf("passes after an empty diff: %d, want %d", got, before)
	}
}

// TestReconcileRetriesAfterFailure: a failed pass is redone after the next
// sync even if that sync's Diff is empty, gone addresses included.
func TestReconcileRetriesAfterFailure(t *testing.T) {
	tb := conntracktest.NewTable()
	r := New(tb, Config{}, nil)
	ctx := context.Background()
	if _, err := r.Reconcile(ctx, state(dnsService(), eps(ready(epA))), fullDiff()); err != nil {
		t.Fatal(err)
	}
	stale := udpVia(c(1), clusterIP, 53, epA)
	gone := udpVia(c(2), lbIP, 53, epB)
	keep := udpVia(c(3), clusterIP, 53, epB)
	if err := tb.Add(stale, gone, keep); err != nil {
		t.Fatal(err)
	}
	sp := dnsService()
	sp.LoadBalancerIPs = nil
	tb.FailNextDelete(errors.New("netlink: no buffer space"))
	if _, err := r.Reconcile(ctx, state(sp, eps(ready(epB))), staleDiff(dnsName, epA)); err == nil {
		t.Fatal("Reconcile succeeded, want the table's error")
	}
	n, err := r.Reconcile(ctx, state(sp, eps(ready(epB))), emptyDiff())
	if err != nil || n != 2 {
		t.Fatalf("retry: Reconcile = %d, %v; want 2 deleted", n, err)
	}
	checkRemaining(t, tb, []conntracktest.Entry{keep})
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.Reconcile(ctxDone, state(sp, eps(ready(epB))), fullDiff()); !errors.Is(err, context.Canceled) {
		t.Errorf("Reconcile with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestReconcileMetrics: each pass is timed, deletions are counted, under
// the ip_family label of the table cleaned.
func TestReconcileMetrics(t *testing.T) {
	m := metrics.New(nil)
	tb := conntracktest.NewTable()
	if err := tb.Add(udpVia(c(1), clusterIP, 53, epA), udpVia(c(2), nodeIP, 30053, epA)); err != nil {
		t.Fatal(err)
	}
	r := New(tb, Config{}, m)
	r.PostSync(context.Background(), state(dnsService(), eps(ready(epB))), staleDiff(dnsName, epA))
	r.PostSync(context.Background(), state(dnsService(), eps(ready(epB))), emptyDiff()) // no pass
	var counter, hist dto.Metric
	if err := m.ConntrackReconcilerDeletedEntriesTotal.WithLabelValues("IPv4").Write(&counter); err != nil {
		t.Fatal(err)
	}
	if err := m.ConntrackReconcilerSyncLatency.WithLabelValues("IPv4").(prometheus.Metric).Write(&hist); err != nil {
		t.Fatal(err)
	}
	if got := counter.GetCounter().GetValue(); got != 2 {
		t.Errorf("deleted entries total = %v, want 2", got)
	}
	if got := hist.GetHistogram().GetSampleCount(); got != 1 {
		t.Errorf("sync latency samples = %d, want 1", got)
	}
}
