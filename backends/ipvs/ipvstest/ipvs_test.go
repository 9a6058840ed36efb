package ipvstest

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/moby/ipvs"
)

func TestFakeIPVSIsStrict(t *testing.T) {
	f := NewFakeIPVS()
	svc := &ipvs.Service{AddressFamily: syscall.AF_INET, Protocol: syscall.IPPROTO_TCP,
		Address: netip.MustParseAddr("10.96.0.10").AsSlice(), Port: 80, SchedName: "rr"}
	d := &ipvs.Destination{Address: netip.MustParseAddr("10.244.1.2").AsSlice(), Port: 8080, Weight: 1}
	v6 := &ipvs.Destination{Address: netip.MustParseAddr("fd00::2").AsSlice(), Port: 8080, Weight: 1}
	bad := *svc
	bad.SchedName = "nope"
	steps := []struct {
		name string
		call func() error
		want error
	}{
		{"unknown scheduler", func() error { return f.NewService(&bad) }, syscall.ENOENT},
		{"real server of a missing service", func() error { return f.NewDestination(svc, d) }, syscall.ESRCH},
		{"create", func() error { return f.NewService(svc) }, nil},
		{"create twice", func() error { return f.NewService(svc) }, syscall.EEXIST},
		{"add real server", func() error { return f.NewDestination(svc, d) }, nil},
		{"add it twice", func() error { return f.NewDestination(svc, d) }, syscall.EEXIST},
		{"NAT to another family", func() error { return f.NewDestination(svc, v6) }, syscall.EINVAL},
		{"update a missing real server", func() error { return f.UpdateDestination(svc, v6) }, syscall.EINVAL},
		{"delete it", func() error { return f.DelDestination(svc, d) }, nil},
		{"delete it again", func() error { return f.DelDestination(svc, d) }, syscall.ENOENT},
		{"delete the service", func() error { return f.DelService(svc) }, nil},
		{"delete it again", func() error { return f.DelService(svc) }, syscall.ESRCH},
	}
	for _, s := range steps {
		if err := s.call(); !errors.Is(err, s.want) && err != s.want {
			t.Errorf("%s: %v, want %v", s.name, err, s.want)
		}
	}
	if got := f.Ops(); len(got) != 4 {
		t.Errorf("ops %q: want only the 4 successful changes", got)
	}
}

func TestFakeIPVSReportsHashedFlag(t *testing.T) {
	f := NewFakeIPVS()
	svc := &ipvs.Service{AddressFamily: syscall.AF_INET, FWMark: 0x10000, SchedName: "rr", Flags: 1, Timeout: 60}
	if err := f.NewService(svc); err != nil {
		t.Fatal(err)
	}
	got, _ := f.GetServices()
	if len(got) != 1 || got[0].Flags != 1|flagHashed || got[0].FWMark != 0x10000 {
		t.Errorf("GetServices = %+v", got)
	}
	if v, ok := f.Lookup(0x10000, "TCP", netip.MustParseAddrPort("192.0.2.1:80")); !ok || v.Key != "FWM/0x10000/IPv4" {
		t.Errorf("Lookup by mark = %+v, %v", v, ok)
	}
}
