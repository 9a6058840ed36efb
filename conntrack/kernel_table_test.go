package conntrack

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/conntrack/conntracktest"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// createEntries inserts entries into a real table through ctnetlink.
func createEntries(tb testing.TB, ns string, entries []conntracktest.Entry) {
	tb.Helper()
	err := kerneltest.InNetns(ns, func() error {
		h, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		for _, e := range entries {
			if err := h.ConntrackCreate(netlink.ConntrackTable, inetFamily(e.Family()), kernelFlow(e)); err != nil {
				return fmt.Errorf("create %s: %w", e, err)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func kernelFlow(e conntracktest.Entry) *netlink.ConntrackFlow {
	fam := uint8(inetFamily(e.Family()))
	f := &netlink.ConntrackFlow{
		FamilyType: fam,
		Forward: netlink.IPTuple{Protocol: e.Proto, SrcIP: e.OrigSrc.Addr().AsSlice(), DstIP: e.OrigDst.Addr().AsSlice(),
			SrcPort: e.OrigSrc.Port(), DstPort: e.OrigDst.Port()},
		Reverse: netlink.IPTuple{Protocol: e.Proto, SrcIP: e.ReplySrc.Addr().AsSlice(), DstIP: e.ReplyDst.Addr().AsSlice(),
			SrcPort: e.ReplySrc.Port(), DstPort: e.ReplyDst.Port()},
		TimeOut: 600,
	}
	if e.Proto == conntracktest.TCP {
		f.ProtoInfo = &netlink.ProtoInfoTCP{State: 3} // ESTABLISHED
	}
	return f
}

// entriesOf reads a real table back as Entries, ports included (SCTP's
// too: NetlinkTable parses them itself).
func entriesOf(tb testing.TB, tbl *NetlinkTable, fam v1.IPFamily) []string {
	tb.Helper()
	flows, err := tbl.List(fam, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, f := range flows {
		if f.Forward.Protocol == protoUDP || f.Forward.Protocol == protoTCP || f.Forward.Protocol == protoSCTP {
			out = append(out, describe(f))
		}
	}
	slices.Sort(out)
	return out
}

func describe(f *netlink.ConntrackFlow) string {
	t := tupleOf(f)
	return fmt.Sprintf("%d %s>%s reply %s", t.proto, addrOf(f.Forward.SrcIP), t.origDst, t.replySrc)
}

// TestKernelTableMatchesFake runs the same cleanup against a real
// conntrack table (entries created through ctnetlink in a fresh namespace)
// and against the fake, and requires the same survivors: the fake models
// the kernel and netlink as the reconciler sees them.
func TestKernelTableMatchesFake(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "syct-"+"tbl")
	sp := dualStackService()
	sctp := sctpService()
	st := state(sp, eps(ready(epB), ready(epB6)), sctp, eps(ready(addrPort("10.244.2.10:9999"))))
	entries := []conntracktest.Entry{
		udpVia(c(1), clusterIP, 53, epA),
		udpVia(c(2), clusterIP, 53, epB),
		udpVia(c(3), nodeIP, 30053, epA),
		conntracktest.Plain(conntracktest.UDP, c(4), netip.AddrPortFrom(clusterIP, 53)),
		conntracktest.NATed(conntracktest.TCP, c(5), netip.AddrPortFrom(clusterIP, 53), epA),
		conntracktest.Plain(conntracktest.UDP, c(6), epA),
		conntracktest.NATed(conntracktest.SCTP, c(7), addrPort("10.96.0.20:9999"), addrPort("10.244.1.10:9999")),
		conntracktest.NATed(conntracktest.SCTP, c(8), addrPort("10.96.0.20:9999"), addrPort("10.244.2.10:9999")),
		// A reachable endpoint address on a port that is no endpoint:
		// stale only when SCTP ports are read.
		conntracktest.NATed(conntracktest.SCTP, c(9), addrPort("10.96.0.20:9999"), addrPort("10.244.2.10:9998")),
		udpVia(c6(1), clusterIP6, 53, epA6),
		udpVia(c6(2), clusterIP6, 53, epB6),
	}
	diff := staleDiff(dnsName, epA, epA6, addrPort("10.244.1.10:9999"))
	cfg := Config{Families: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}}

	createEntries(t, ns, entries)
	real := netlinkTableIn(t, ns)
	realDeleted, err := New(real, cfg, nil).Reconcile(context.Background(), st, diff)
	if err != nil {
		t.Fatal(err)
	}
	fake := conntracktest.NewTable()
	if err := fake.Add(entries...); err != nil {
		t.Fatal(err)
	}
	fakeDeleted, err := New(fake, cfg, nil).Reconcile(context.Background(), st, diff)
	if err != nil {
		t.Fatal(err)
	}
	if realDeleted != 6 || fakeDeleted != realDeleted {
		t.Errorf("deleted: kernel %d, fake %d; want 6 each", realDeleted, fakeDeleted)
	}
	for _, fam := range cfg.Families {
		got := entriesOf(t, real, fam)
		want := fakeEntries(fake, fam)
		if !slices.Equal(got, want) {
			t.Errorf("%s survivors:\nkernel %q\nfake   %q", fam, got, want)
		}
	}
}

func fakeEntries(fake *conntracktest.Table, fam v1.IPFamily) []string {
	var out []string
	for _, e := range fake.Entries(fam) {
		out = append(out, describe(kernelFlow(e)))
	}
	slices.Sort(out)
	return out
}

// BenchmarkKernelReconcile measures one pass over a real table of UDP
// entries, some of them stale, in a fresh namespace. Run with
// SWITCHYARD_KERNEL_TESTS=1 go test -run X -bench KernelReconcile.
func BenchmarkKernelReconcile(b *testing.B) {
	kerneltest.Require(b)
	for _, size := range []struct{ entries, stale int }{{20000, 0}, {20000, 1000}, {100000, 0}, {100000, 1000}} {
		b.Run(fmt.Sprintf("entries=%d/stale=%d", size.entries, size.stale), func(b *testing.B) {
			benchReconcile(b, size.entries, size.stale)
		})
	}
}

func benchReconcile(b *testing.B, entries, stale int) {
	ns := kerneltest.NewNetns(b, "syct-"+"bench")
	createEntries(b, ns, benchFlows(0, entries-stale, kEpB))
	tbl := netlinkTableIn(b, ns)
	r := New(tbl, Config{}, nil)
	st := kernelState(kEpB)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		createEntries(b, ns, benchFlows(entries*(i+1), stale, kEpA))
		b.StartTimer()
		n, err := r.Reconcile(context.Background(), st, staleDiff(dnsName, kEpA))
		if err != nil || n != stale {
			b.Fatalf("Reconcile = %d, %v; want %d deleted", n, err, stale)
		}
	}
}

// benchFlows returns n UDP entries from distinct clients to the kernel
// test's cluster IP, NATed to ep.
func benchFlows(first, n int, ep netip.AddrPort) []conntracktest.Entry {
	out := make([]conntracktest.Entry, 0, n)
	for i := first; i < first+n; i++ {
		k := i / 50000
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 245, byte(k / 256), byte(k % 256)}), uint16(10000+i%50000))
		out = append(out, conntracktest.NATed(conntracktest.UDP, client, kClusterIP, ep))
	}
	return out
}
