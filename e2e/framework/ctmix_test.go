package framework

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/ctnetlink"
)

var ctFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}

func testMix(f corev1.IPFamily, entries int) *CTMix {
	m := &CTMix{Entries: entries}
	for s := range 4 {
		svc := CTService{IP: netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + s)})}
		if f == corev1.IPv6Protocol {
			svc.IP = netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0, 0x96, 15: byte(10 + s)})
		}
		for e := range 3 {
			svc.Endpoints = append(svc.Endpoints, CTEndpointIP(f, s, e))
		}
		m.Services = append(m.Services, svc)
	}
	return m
}

func TestCTMixEntriesAreUniqueAndIndexed(t *testing.T) {
	for _, f := range ctFamilies {
		t.Run(string(f), func(t *testing.T) {
			m := testMix(f, 5000)
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			if m.Family() != f {
				t.Fatalf("Family() = %s", m.Family())
			}
			seen := map[string]int{}
			classes := map[CTClass]int{}
			for i := range m.Entries {
				o, r := m.Entry(i)
				for _, a := range []netip.AddrPort{o.Src, o.Dst, r.Src, r.Dst} {
					if FamilyOf(a.Addr().String()) != f {
						t.Fatalf("entry %d: %v is not %s", i, a, f)
					}
				}
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
		})
	}
}

// The IPv6 mix is the IPv4 one in other addresses: entry for entry the
// same protocols, ports, classes and services.
func TestCTMixFamiliesAlike(t *testing.T) {
	m4, m6 := testMix(corev1.IPv4Protocol, 2000), testMix(corev1.IPv6Protocol, 2000)
	for i := range m4.Entries {
		o4, r4 := m4.Entry(i)
		o6, r6 := m6.Entry(i)
		if o4.Proto != o6.Proto || o4.Src.Port() != o6.Src.Port() || o4.Dst.Port() != o6.Dst.Port() ||
			r4.Src.Port() != r6.Src.Port() || r4.Dst.Port() != r6.Dst.Port() {
			t.Fatalf("entry %d: %v %v (IPv4) and %v %v (IPv6) differ in more than addresses", i, o4, r4, o6, r6)
		}
		if m4.Index(o6, r6) != -1 || m6.Index(o4, r4) != -1 {
			t.Fatalf("entry %d of one family is indexed in the other's mix", i)
		}
	}
}

// Services 0, 4, 8, ... share UDP 53; every other service has a UDP port
// of its own, used by nothing else in the mix.
func TestCTUDPPortSpread(t *testing.T) {
	others := map[uint16]bool{CTTCPPort: true, CTTCPEndpoint: true, CTUDPEndpoint: true, ctOtherTCPPort: true, ctOtherUDPPort: true}
	own := map[uint16]int{}
	dns := 0
	for s := range 256 {
		p := CTUDPPort(s)
		switch {
		case s%4 == 0:
			if p != CTDNSPort {
				t.Errorf("service %d: UDP %d, want %d", s, p, CTDNSPort)
			}
			dns++
		case p == CTDNSPort || others[p]:
			t.Errorf("service %d: UDP %d is another port of the mix", s, p)
		default:
			if j, dup := own[p]; dup {
				t.Errorf("services %d and %d share UDP %d", j, s, p)
			}
			own[p] = s
		}
	}
	if dns != 64 || len(own) != 192 {
		t.Errorf("%d services on 53, %d on ports of their own", dns, len(own))
	}
}

func TestCTMixIndexRejectsStrangers(t *testing.T) {
	for _, f := range ctFamilies {
		t.Run(string(f), func(t *testing.T) {
			m := testMix(f, 100)
			stranger := netip.MustParseAddrPort("192.168.77.2:20000")
			if f == corev1.IPv6Protocol {
				stranger = netip.MustParseAddrPort("[fd00:77::2]:20000")
			}
			base := m.clientBase()
			cases := map[string]func(o, r *ctnetlink.Tuple){
				"past the end":        func(o, r *ctnetlink.Tuple) { o.Src = m.client(100) },
				"another reply":       func(o, r *ctnetlink.Tuple) { r.Src = netip.AddrPortFrom(r.Src.Addr().Next(), r.Src.Port()) },
				"another client":      func(o, r *ctnetlink.Tuple) { o.Src = stranger },
				"below the clients":   func(o, r *ctnetlink.Tuple) { o.Src = netip.AddrPortFrom(base.Prev(), ctClientPort) },
				"another client port": func(o, r *ctnetlink.Tuple) { o.Src = netip.AddrPortFrom(o.Src.Addr(), 40000) },
			}
			for name, change := range cases {
				o, r := m.Entry(7)
				change(&o, &r)
				if got := m.Index(o, r); got != -1 {
					t.Errorf("%s: Index = %d, want -1", name, got)
				}
			}
		})
	}
}

func TestCTMixValidate(t *testing.T) {
	mixed := testMix(corev1.IPv4Protocol, 10)
	mixed.Services[1].IP = testMix(corev1.IPv6Protocol, 10).Services[1].IP
	wrongEndpoint := testMix(corev1.IPv6Protocol, 10)
	wrongEndpoint.Services[2].Endpoints[1] = CTEndpointIP(corev1.IPv4Protocol, 2, 1)
	mapped := testMix(corev1.IPv4Protocol, 10)
	mapped.Services[0].IP = netip.AddrFrom16(mapped.Services[0].IP.As16())
	for name, m := range map[string]*CTMix{
		"no entries":                  {Entries: 0, Services: testMix(corev1.IPv4Protocol, 1).Services},
		"no services":                 {Entries: 10},
		"services of two families":    mixed,
		"an endpoint of the other":    wrongEndpoint,
		"an IPv4-mapped IPv6 service": mapped,
		"too many entries":            {Entries: CTMaxEntries + 1, Services: testMix(corev1.IPv6Protocol, 1).Services},
	} {
		if err := m.Validate(); err == nil {
			t.Errorf("%s: Validate passed", name)
		}
	}
}
