package conntrack

import (
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
)

// passEntries stays under the machine-wide nf_conntrack_max (262144 by
// default), which a test never raises.
const passEntries = 200000

// fillPassTable inserts passEntries: three quarters UDP to one service
// address NATed to ten endpoints (10.244.1.0-9:53), a quarter TCP.
func fillPassTable(t *testing.T, ns string) {
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := ctnetlink.Open(h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := c.NewBatch(unix.AF_INET, ctnetlink.MsgNew)
	for i := range passEntries {
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}), uint16(20000+i>>16))
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 1, byte(i / 4 % 10)}), 53)
		orig := ctnetlink.Tuple{Proto: ctnetlink.UDP, Src: client, Dst: netip.AddrPortFrom(clusterIP, 53)}
		if i%4 == 3 {
			orig.Proto, orig.Dst = ctnetlink.TCP, netip.AddrPortFrom(clusterIP, 80)
		}
		reply := ctnetlink.Tuple{Proto: orig.Proto, Src: ep, Dst: client}
		if err := b.Add(func(buf []byte) []byte { return ctnetlink.AppendNew(buf, orig, reply, 600) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Errors(); n > 0 {
		t.Fatalf("%d creates failed: %v", n, err)
	}
}

// heapWatch is a filter that matches the entries NATed to one endpoint
// and samples the heap as the pass goes.
type heapWatch struct {
	ep         netip.AddrPort
	scope      []ctnetlink.Filter
	seen       int
	base, peak uint64
}

func (w *heapWatch) Scope() []ctnetlink.Filter { return w.scope }

func (w *heapWatch) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	w.seen++
	if w.seen%5000 == 0 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		w.peak = max(w.peak, ms.HeapAlloc)
	}
	t := tupleOf(f)
	return t.proto == protoUDP && t.replySrc == w.ep
}

// TestKernelPassMemory: a pass over a table of 200k entries holds the
// dump a datagram at a time (the heap stays within a few MB of where it
// started; reading the whole dump first held ~60 MB), the kernel sends
// only the entries the scope names, and exactly the matched entries go.
func TestKernelPassMemory(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "ctpass")
	fillPassTable(t, ns)
	tbl := netlinkTableIn(t, ns)
	if n, err := tbl.Count(); err != nil || n != passEntries {
		t.Fatalf("table holds %d entries (%v), want %d", n, err, passEntries)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w := &heapWatch{ep: addrPort("10.244.1.0:53"), scope: []ctnetlink.Filter{{Proto: ctnetlink.UDP}}, base: ms.HeapAlloc}
	n, err := tbl.Delete(v1.IPv4Protocol, w)
	if err != nil {
		t.Fatal(err)
	}
	if want := passEntries * 3 / 4 / 10; n != want {
		t.Errorf("deleted %d, want %d", n, want)
	}
	if w.seen != passEntries*3/4 {
		t.Errorf("the filter saw %d entries; the kernel should send the %d UDP ones only", w.seen, passEntries*3/4)
	}
	if left, _ := tbl.Count(); left != passEntries-n {
		t.Errorf("%d entries left, want %d", left, passEntries-n)
	}
	grew := int64(w.peak) - int64(w.base)
	t.Logf("heap during the pass: %d MB above the %d MB before", grew>>20, w.base>>20)
	if grew > 16<<20 {
		t.Errorf("the heap grew by %d MB during a pass over %d entries: the dump is held, not streamed", grew>>20, passEntries)
	}
}

// epFilter matches the entries NATed to one endpoint, from any number of
// goroutines.
type epFilter struct {
	ep    netip.Addr
	scope []ctnetlink.Filter
	seen  atomic.Int64
}

func (f *epFilter) Scope() []ctnetlink.Filter { return f.scope }

func (f *epFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	f.seen.Add(1)
	return tupleOf(flow).replySrc.Addr() == f.ep
}

// TestKernelScopedDumpsInLanes: a Scope of several service addresses is
// dumped one address per dump, the dumps spread over the table's lanes;
// every entry of the named addresses is seen once and exactly the
// matched ones go.
func TestKernelScopedDumpsInLanes(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNetns(t, "ctlanes")
	fillPassTable(t, ns)
	tbl := netlinkTableIn(t, ns)
	f := &epFilter{ep: addr("10.244.1.0"), scope: []ctnetlink.Filter{
		{Proto: ctnetlink.UDP, OrigDst: netip.AddrPortFrom(clusterIP, 53)},
		{Proto: ctnetlink.TCP, OrigDst: netip.AddrPortFrom(clusterIP, 80)},
		{Proto: ctnetlink.UDP, OrigDst: addrPort("10.96.0.99:53")},
	}}
	n, err := tbl.Delete(v1.IPv4Protocol, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lanes", len(tbl.lanes))
	if want := passEntries / 10; n != want {
		t.Errorf("deleted %d, want %d", n, want)
	}
	if got := f.seen.Load(); got != passEntries {
		t.Errorf("the filter saw %d entries, want each of the %d once", got, passEntries)
	}
	if left, _ := tbl.Count(); left != passEntries-n {
		t.Errorf("%d entries left, want %d", left, passEntries-n)
	}
}
