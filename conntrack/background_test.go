package conntrack

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// gatedTable holds every Delete until released.
type gatedTable struct {
	*conntracktest.Table
	entered chan struct{}
	release chan struct{}
}

func (g *gatedTable) Delete(family v1.IPFamily, f netlink.CustomConntrackFilter) (int, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Table.Delete(family, f)
}

func waitIdle(t *testing.T, r *Reconciler) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !r.idle() {
		if time.Now().After(deadline) {
			t.Fatal("the background pass never finished")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBackgroundPasses: with Config.Background, PostSync returns while
// the pass waits on the table; the syncs after it plan passes that merge
// into one, which cleans every address they named, with the latest
// State's decisions.
func TestBackgroundPasses(t *testing.T) {
	fake := conntracktest.NewTable()
	g := &gatedTable{Table: fake, entered: make(chan struct{}), release: make(chan struct{})}
	err := fake.Add(udpVia(c(1), clusterIP, 53, epA), udpVia(c(2), clusterIP, 53, epB),
		udpVia(c(3), ntpIP, 123, epC), udpVia(c(4), ntpIP, 123, epX))
	if err != nil {
		t.Fatal(err)
	}
	r := New(g, Config{Background: true}, nil)
	ctx := context.Background()
	both := func(dns, ntp []netip.AddrPort) *proxier.State {
		var d, n []proxier.Endpoint
		for _, ap := range dns {
			d = append(d, ready(ap))
		}
		for _, ap := range ntp {
			n = append(n, ready(ap))
		}
		return state(dnsService(), eps(d...), ntpService(), eps(n...))
	}
	// The first sync: full, wide; its pass holds the table.
	r.PostSync(ctx, both([]netip.AddrPort{epA, epB}, []netip.AddrPort{epC, epX}), fullDiff())
	<-g.entered
	// Two syncs while it runs: dns loses A, then ntp loses X.
	r.PostSync(ctx, both([]netip.AddrPort{epB}, []netip.AddrPort{epC, epX}), staleDiff(dnsName, epA))
	r.PostSync(ctx, both([]netip.AddrPort{epB}, []netip.AddrPort{epC}), staleDiff(ntpName, epX))
	g.release <- struct{}{}
	<-g.entered // the merged pass
	g.release <- struct{}{}
	waitIdle(t, r)
	if n := fake.Passes(v1.IPv4Protocol); n != 2 {
		t.Errorf("%d passes, want 2 (the two syncs' passes merged)", n)
	}
	want := []string{"17 10.96.0.10:53", "17 10.96.0.11:123", "17 192.168.1.5:30053", "17 198.51.100.9:53", "17 203.0.113.7:53"}
	if got := scopeStrings(fake.LastScope(v1.IPv4Protocol)); !slices.Equal(got, want) {
		t.Errorf("merged scope %v, want %v", got, want)
	}
	checkRemaining(t, fake, []conntracktest.Entry{udpVia(c(2), clusterIP, 53, epB), udpVia(c(3), ntpIP, 123, epC)})
}

func TestMergeJobs(t *testing.T) {
	f := func(port uint16) ctnetlink.Filter {
		return ctnetlink.Filter{Proto: protoUDP, OrigDst: netip.AddrPortFrom(clusterIP, port)}
	}
	ixOld, ixNew := serviceIndex{}, serviceIndex{newFlowKey(protoUDP, clusterIP, 53): &target{}}
	old := &job{gone: keySet{newFlowKey(protoUDP, ntpIP, 123): {}}, families: []familyPass{
		{family: v1.IPv4Protocol, index: ixOld, scope: []ctnetlink.Filter{f(53), f(54)}},
		{family: v1.IPv6Protocol, index: ixOld, scope: []ctnetlink.Filter{f(55)}},
	}}
	cur := &job{families: []familyPass{{family: v1.IPv4Protocol, index: ixNew, scope: []ctnetlink.Filter{f(53)}}}}
	m := mergeJobs(old, cur)
	if m.wide || len(m.families) != 2 || len(m.gone) != 1 {
		t.Fatalf("merged %+v", m)
	}
	if v4 := m.families[0]; len(v4.index) != 1 || !slices.Equal(v4.scope, []ctnetlink.Filter{f(53), f(54)}) {
		t.Errorf("IPv4: the newer index with both scopes, got %+v", v4)
	}
	if v6 := m.families[1]; v6.family != v1.IPv6Protocol || len(v6.scope) != 1 {
		t.Errorf("IPv6, only in the older pass, kept: %+v", v6)
	}
	cur.wide = true
	if m := mergeJobs(old, cur); !m.wide || !slices.Equal(m.families[0].scope, []ctnetlink.Filter{{Proto: protoUDP}}) {
		t.Errorf("a wide pass merged: %+v", m)
	}
}
