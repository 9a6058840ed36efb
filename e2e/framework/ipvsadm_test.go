package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ipvsadmListing is `ipvsadm -Ln` as Debian's ipvsadm 1.31 prints it.
const ipvsadmListing = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.10:80 rr
  -> 10.244.0.2:8080              Masq    1      0          0
  -> 10.244.0.3:8080              Masq    0      2          1
UDP  10.96.0.10:80 rr persistent 10800
  -> 10.244.0.2:8080              Masq    1      0          0
TCP  10.96.0.11:443 rr
FWM  16384 rr
  -> 10.244.0.4:8080              Masq    1      0          0
`

func TestParseIPVSList(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    []IPVSVirtualServer
		wantErr bool
	}{
		{
			name: "listing",
			out:  ipvsadmListing,
			want: []IPVSVirtualServer{
				{Key: "TCP 10.96.0.10:80", Scheduler: "rr", Reals: []IPVSRealServer{
					{Addr: "10.244.0.2:8080", Forward: "Masq", Weight: 1},
					{Addr: "10.244.0.3:8080", Forward: "Masq", Weight: 0},
				}},
				{Key: "UDP 10.96.0.10:80", Scheduler: "rr", Flags: "persistent 10800", Reals: []IPVSRealServer{
					{Addr: "10.244.0.2:8080", Forward: "Masq", Weight: 1},
				}},
				{Key: "TCP 10.96.0.11:443", Scheduler: "rr"},
				{Key: "FWM 16384", Scheduler: "rr", Reals: []IPVSRealServer{
					{Addr: "10.244.0.4:8080", Forward: "Masq", Weight: 1},
				}},
			},
		},
		{
			name: "no virtual servers",
			out:  "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n",
		},
		{name: "real server first", out: "  -> 10.244.0.2:8080 Masq 1 0 0\n", wantErr: true},
		{name: "bad weight", out: "TCP  10.96.0.10:80 rr\n  -> 10.244.0.2:8080 Masq x 0 0\n", wantErr: true},
		{name: "garbage", out: "Can't initialize ipvs: Protocol not available\n", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ParseIPVSList(tc.out)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error = %v, wantErr %v", tc.name, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestFindIPVS(t *testing.T) {
	vss, err := ParseIPVSList(ipvsadmListing)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := FindIPVS(vss, "UDP 10.96.0.10:80"); !ok || len(v.Reals) != 1 {
		t.Errorf("FindIPVS(UDP 10.96.0.10:80) = %+v, %v; want the one-real-server UDP service", v, ok)
	}
	if _, ok := FindIPVS(vss, "TCP 10.96.0.99:80"); ok {
		t.Errorf("FindIPVS found a virtual server that is not listed")
	}
}
