package ipvs

import (
	"net/netip"
	"testing"

	"github.com/moby/ipvs"
)

// A listing as Linux 6.1 prints /proc/net/ip_vs for an IPv4 service with
// persistence, a draining real server, an IPv6 service and a fwmark one.
const procSample = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
TCP  0A60000A:0050 rr persistent 300 FFFFFFFF
  -> 0AF40102:1F90      Masq    1      2          3
  -> 0AF40203:1F90      Masq    0      1          0
UDP  [fd00:0010:0096:0000:0000:0000:0000:000a]:0035 sh
  -> [fd00:0010:0244:0001:0000:0000:0000:0002]:0035 Masq    1      0          0
FWM  00010000 rr
`

func TestParseProcTable(t *testing.T) {
	got, err := parseProcTable([]byte(procSample))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d virtual servers, want 3: %+v", len(got), got)
	}
	k, ok := keyOf(got[0].Service)
	if !ok || k.String() != "TCP/10.96.0.10:80" || got[0].Service.SchedName != "rr" ||
		got[0].Service.Flags&flagPersistent == 0 || got[0].Service.Timeout != 300 {
		t.Errorf("first service %+v (key %v)", got[0].Service, k)
	}
	d := got[0].Dests
	if len(d) != 2 || d[0].Weight != 1 || d[0].Active != 2 || d[0].Inactive != 3 ||
		d[1].Weight != 0 || d[0].Forward != ipvs.ConnectionFlagMasq {
		t.Errorf("real servers %+v", d)
	}
	if d[1].Addr != netip.MustParseAddrPort("10.244.2.3:8080") {
		t.Errorf("second real server %v", d[1].Addr)
	}
	if k, ok := keyOf(got[1].Service); !ok || k.String() != "UDP/[fd00:10:96::a]:53" || len(got[1].Dests) != 1 {
		t.Errorf("IPv6 service %v %+v", k, got[1])
	}
	if got[2].Service.FWMark != 0x10000 || got[2].Service.AddressFamily != 0 || len(got[2].Dests) != 0 {
		t.Errorf("fwmark service %+v", got[2].Service)
	}
	if _, err := parseProcTable([]byte("TCP  0A60000A:zz rr\n")); err == nil {
		t.Errorf("a bad port parsed")
	}
}
