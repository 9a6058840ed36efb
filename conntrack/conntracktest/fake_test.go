package conntracktest

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
)

var (
	client  = netip.MustParseAddrPort("10.0.0.1:40000")
	service = netip.MustParseAddrPort("10.96.0.10:53")
	epA     = netip.MustParseAddrPort("10.244.1.10:53")
	epB     = netip.MustParseAddrPort("10.244.2.10:53")
)

func TestAddRejectsWhatTheKernelRejects(t *testing.T) {
	cases := []struct {
		name    string
		entries []Entry
		exist   bool
	}{
		{"same original tuple", []Entry{NATed(UDP, client, service, epA), NATed(UDP, client, service, epB)}, true},
		{"same reply tuple", []Entry{NATed(UDP, client, service, epA), Plain(UDP, client, epA)}, true},
		{"mixed families", []Entry{NATed(UDP, client, service, netip.MustParseAddrPort("[fd00::1]:53"))}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewTable()
			err := tb.Add(tc.entries...)
			if err == nil || errors.Is(err, ErrExist) != tc.exist {
				t.Fatalf("Add = %v, want an error (ErrExist: %v)", err, tc.exist)
			}
			if n := len(tb.Entries(v1.IPv4Protocol)); n != 0 {
				t.Errorf("a rejected Add left %d entries", n)
			}
		})
	}
}

type recordFilter struct{ seen []*netlink.ConntrackFlow }

func (r *recordFilter) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	r.seen = append(r.seen, f)
	return f.Forward.Protocol == SCTP
}

// TestDeleteShowsFlowsAsNetlinkParsesThem: one pass per family, SCTP and
// UDP flows with their ports (as NetlinkTable's own dump parses them).
func TestDeleteShowsFlowsAsNetlinkParsesThem(t *testing.T) {
	tb := NewTable()
	v6 := NATed(UDP, netip.MustParseAddrPort("[fd00::5]:1"), netip.MustParseAddrPort("[fd00::10]:53"),
		netip.MustParseAddrPort("[fd00::20]:53"))
	if err := tb.Add(NATed(SCTP, client, service, epA), NATed(UDP, client, service, epB), v6); err != nil {
		t.Fatal(err)
	}
	f := &recordFilter{}
	n, err := tb.Delete(v1.IPv4Protocol, f)
	if err != nil || n != 1 {
		t.Fatalf("Delete = %d, %v; want 1", n, err)
	}
	if len(f.seen) != 2 || tb.Passes(v1.IPv4Protocol) != 1 || tb.Passes(v1.IPv6Protocol) != 0 {
		t.Fatalf("filter saw %d flows, passes %d/%d; want 2 flows, 1 IPv4 pass",
			len(f.seen), tb.Passes(v1.IPv4Protocol), tb.Passes(v1.IPv6Protocol))
	}
	sctp, udp := f.seen[0], f.seen[1]
	if sctp.Forward.DstPort != service.Port() || sctp.Reverse.SrcPort != epA.Port() || len(sctp.Forward.DstIP) != 4 {
		t.Errorf("SCTP flow shown without ports or with a 16-byte IPv4 address: %+v", sctp)
	}
	if udp.Forward.DstPort != 53 || udp.Reverse.SrcPort != 53 {
		t.Errorf("UDP flow shown without ports: %+v", udp)
	}
	if got := tb.Entries(v1.IPv4Protocol); len(got) != 1 || got[0].Proto != UDP {
		t.Errorf("IPv4 entries after Delete: %v", got)
	}
	if got := tb.Entries(v1.IPv6Protocol); len(got) != 1 {
		t.Errorf("IPv6 entries after an IPv4 Delete: %v", got)
	}
}
