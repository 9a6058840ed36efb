package ctnetlink

import (
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// kernelEntries is how many entries the kernel test inserts: under the
// machine-wide nf_conntrack_max (262144 by default), which a test never
// raises.
const kernelEntries = 20000

// testEntry i: a quarter each of UDP to the service (NATed to one of 4
// endpoints), TCP to the service, UDP straight to an endpoint, UDP
// elsewhere.
func testEntry(i int) (orig, reply Tuple) {
	client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}), 40000)
	svc := netip.MustParseAddrPort("10.96.0.10:53")
	ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{172, 30, 0, byte(1 + i%4)}), 5353)
	switch i % 4 {
	case 0:
		orig = Tuple{UDP, client, svc}
		return orig, Tuple{UDP, ep, client}
	case 1:
		orig = Tuple{TCP, client, netip.AddrPortFrom(svc.Addr(), 80)}
		return orig, Tuple{TCP, netip.AddrPortFrom(ep.Addr(), 8080), client}
	case 2:
		orig = Tuple{UDP, client, ep}
	default:
		orig = Tuple{UDP, client, netip.MustParseAddrPort("198.18.0.1:53")}
	}
	return orig, Tuple{orig.Proto, orig.Dst, orig.Src}
}

func openIn(t *testing.T, ns string) *Conn {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := Open(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func count(t *testing.T, c *Conn, f Filter) int {
	t.Helper()
	n := 0
	err := c.Dump(unix.AF_INET, f, func(attrs []byte) error {
		orig, reply, err := ParseTuples(attrs)
		if err != nil {
			return err
		}
		if !f.Matches(orig, reply) {
			t.Errorf("filter %+v let through %v / %v", f, orig, reply)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKernelBatchAndFilteredDump inserts entries in batches, reads them
// back through each kind of kernel filter, and deletes some in a batch:
// the kernel sends only what a filter names, and a delete batch removes
// exactly its entries.
func TestKernelBatchAndFilteredDump(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "ctnl")
	c := openIn(t, ns)
	start := time.Now()
	b := c.NewBatch(unix.AF_INET, MsgNew)
	for i := range kernelEntries {
		o, r := testEntry(i)
		if err := b.Add(func(buf []byte) []byte { return AppendNew(buf, o, r, 600) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Errors(); n > 0 {
		t.Fatalf("%d of %d creates failed, e.g. %v (%v)", n, b.Sent, err, b.Failed)
	}
	t.Logf("%d entries created in %v", b.Sent, time.Since(start))
	if n, err := c.Count(); err != nil || n != kernelEntries {
		t.Errorf("Count: %d, %v; want %d", n, err, kernelEntries)
	}
	// A second create of an existing entry is refused (NLM_F_EXCL), and
	// counted.
	again := c.NewBatch(unix.AF_INET, MsgNew)
	o, r := testEntry(0)
	_ = again.Add(func(buf []byte) []byte { return AppendNew(buf, o, r, 600) })
	if err := again.Flush(); err != nil || again.Failed[syscall.EEXIST] != 1 {
		t.Errorf("creating an existing entry: %v, failures %v; want one EEXIST", err, again.Failed)
	}

	svc := netip.MustParseAddrPort("10.96.0.10:53")
	ep1 := netip.MustParseAddrPort("172.30.0.1:5353")
	cases := []struct {
		name string
		f    Filter
		want int
	}{
		{"everything", Filter{}, kernelEntries},
		{"UDP", Filter{Proto: UDP}, kernelEntries * 3 / 4},
		{"TCP", Filter{Proto: TCP}, kernelEntries / 4},
		{"UDP to the service port", Filter{Proto: UDP, OrigDst: svc}, kernelEntries / 4},
		{"UDP to the service address, any port", Filter{Proto: UDP, OrigDst: netip.AddrPortFrom(svc.Addr(), 0)}, kernelEntries / 4},
		// i%4 == 0 with i%4+1 == 1: every entry NATed to ep1; and i%4 == 2
		// sent to ep1 itself never happens (i%4+1 == 3 there).
		{"UDP answered by one endpoint", Filter{Proto: UDP, ReplySrc: ep1}, kernelEntries / 4},
		{"UDP to a service port nobody uses", Filter{Proto: UDP, OrigDst: netip.AddrPortFrom(svc.Addr(), 54)}, 0},
	}
	for _, tc := range cases {
		start := time.Now()
		if got := count(t, c, tc.f); got != tc.want {
			t.Errorf("%s: %d entries, want %d", tc.name, got, tc.want)
		}
		t.Logf("%s: dump in %v", tc.name, time.Since(start))
	}

	// Delete the service's UDP entries while dumping them, through a
	// second socket, as the reconciler does.
	del := openIn(t, ns).NewBatch(unix.AF_INET, MsgDelete)
	err := c.Dump(unix.AF_INET, Filter{Proto: UDP, OrigDst: svc}, func(attrs []byte) error { return del.AddRaw(attrs) })
	if err != nil {
		t.Fatal(err)
	}
	if err := del.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := del.Errors(); n > 0 {
		t.Errorf("%d deletes failed: %v", n, err)
	}
	if got := count(t, c, Filter{}); got != kernelEntries*3/4 {
		t.Errorf("after deleting the service's UDP entries: %d left, want %d", got, kernelEntries*3/4)
	}
	if got := count(t, c, Filter{Proto: UDP, OrigDst: svc}); got != 0 {
		t.Errorf("%d of the deleted entries are still there", got)
	}
}

// TestKernelIPv6FilteredDump: a filter naming an IPv6 service address
// and port sends every entry of that address (the kernel is given the
// protocol and port only: see Filter), nothing of another port or
// protocol, and what it sends passes Matches.
func TestKernelIPv6FilteredDump(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "ctnl6")
	c := openIn(t, ns)
	svc := netip.MustParseAddrPort("[fd00:10:96::a]:53")
	other := netip.MustParseAddrPort("[fd00:10:96::b]:53")
	const n = 4000
	b := c.NewBatch(unix.AF_INET6, MsgNew)
	for i := range n {
		client := netip.AddrPortFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0x10, 0x64, 14: byte(i >> 8), 15: byte(i)}), 40000)
		ep := netip.AddrPortFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0x10, 0x24, 15: byte(1 + i%4)}), 5353)
		var orig Tuple
		switch i % 4 {
		case 0:
			orig = Tuple{UDP, client, svc}
		case 1:
			orig = Tuple{UDP, client, other}
		case 2:
			orig = Tuple{UDP, client, netip.AddrPortFrom(svc.Addr(), 54)}
		default:
			orig = Tuple{TCP, client, svc}
		}
		reply := Tuple{orig.Proto, ep, client}
		if err := b.Add(func(buf []byte) []byte { return AppendNew(buf, orig, reply, 600) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if failed, err := b.Errors(); failed > 0 {
		t.Fatalf("%d creates failed: %v", failed, err)
	}
	f := Filter{Proto: UDP, OrigDst: svc}
	toSvc, sent := 0, 0
	err := c.Dump(unix.AF_INET6, f, func(attrs []byte) error {
		orig, reply, err := ParseTuples(attrs)
		if err != nil {
			return err
		}
		sent++
		if !f.Matches(orig, reply) {
			t.Errorf("sent %v / %v, which the filter does not match", orig, reply)
		}
		if orig.Dst == svc {
			toSvc++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if toSvc != n/4 || sent != n/2 {
		t.Errorf("sent %d entries, %d of them to %v; want %d, %d (UDP port 53 of both addresses)", sent, toSvc, svc, n/2, n/4)
	}
}
