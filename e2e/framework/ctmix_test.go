package framework

import (
	"net/netip"
	"testing"
)

func testMix(entries int) *CTMix {
	m := &CTMix{Entries: entries}
	for s := range 4 {
		svc := CTService{IP: netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + s)})}
		for e := range 3 {
			svc.Endpoints = append(svc.Endpoints, CTEndpointIP(s, e))
		}
		m.Services = append(m.Services, svc)
	}
	return m
}

func TestCTMixEntriesAreUniqueAndIndexed(t *testing.T) {
	m := testMix(5000)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	classes := map[CTClass]int{}
	for i := range m.Entries {
		o, r := m.Entry(i)
		for _, k := range []string{o.Src.String() + o.Dst.String(), r.Src.String() + r.Dst.String()} {
			if j, dup := seen[string(rune(o.Proto))+k]; dup {
				t.Fatalf("entries %d and %d share a tuple %s", j, i, k)
			}
			seen[string(rune(o.Proto))+k] = i
		}
		if got := m.Index(o, r); got != i {
			t.Fatalf("Index(entry %d) = %d", i, got)
		}
		c, _, _ := m.Where(i)
		classes[c]++
	}
	want := map[CTClass]int{CTTCPService: 1750, CTUDPService: 1750, CTTCPOther: 750, CTUDPOther: 500, CTUDPToEndpoint: 250}
	for c, n := range want {
		if classes[c] != n {
			t.Errorf("class %d: %d entries, want %d", c, classes[c], n)
		}
	}
}

func TestCTMixIndexRejectsStrangers(t *testing.T) {
	m := testMix(100)
	o, r := m.Entry(7)
	cases := map[string]func(){
		"past the end":        func() { o.Src = ctClient(100) },
		"another reply":       func() { r.Src = netip.MustParseAddrPort("172.30.9.9:5353") },
		"another client":      func() { o.Src = netip.MustParseAddrPort("192.168.77.2:20000") },
		"another client port": func() { o.Src = netip.AddrPortFrom(o.Src.Addr(), 40000) },
	}
	for name, change := range cases {
		o, r = m.Entry(7)
		change()
		if got := m.Index(o, r); got != -1 {
			t.Errorf("%s: Index = %d, want -1", name, got)
		}
	}
}
