package nftables

import (
	"net/netip"
	"testing"
)

func TestAddrCounts(t *testing.T) {
	c := newAddrCounts()
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")
	mapped := netip.MustParseAddr("::ffff:10.0.0.1")
	for _, a := range []netip.Addr{v4, v6, v4} {
		c.inc(a)
	}
	if c.get(v4) != 2 || c.get(v6) != 1 || c.get(mapped) != 0 {
		t.Errorf("counts %d %d %d, want 2 1 0 (a v4-mapped address is another key)", c.get(v4), c.get(v6), c.get(mapped))
	}
	c.set(v4, 0)
	c.set(v6, -1)
	if len(c.v4)+len(c.v6) != 0 {
		t.Errorf("counts of 0 and -1 left %d addresses", len(c.v4)+len(c.v6))
	}
}
