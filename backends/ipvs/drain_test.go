package ipvs_test

import (
	"slices"
	"testing"

	"github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/iptables/sweep"
)

// A mode taking over from ipvs removes idle virtual servers and the sets at
// once, keeps those still carrying connections (and kube-ipvs0) until the
// connections end, then removes them and kube-ipvs0.
func TestDrainKernelObjects(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080")
	db := e.svc("db", "10.96.0.20", 5432)
	e.eps(db, "10.244.1.3:5432")
	e.sync(nil)
	if err := e.k.IPVS.SetConnections("TCP/10.96.0.10:80", "10.244.1.2:8080", 1, 0); err != nil {
		t.Fatal(err)
	}

	// An nftables-mode successor has swept the ipvs mode's
	// chains, which use the sets.
	if _, err := sweep.Run(t.Context(), e.k.IPTables, runner.IPv4, nil); err != nil {
		t.Fatal(err)
	}
	kept, err := e.b.DrainKernelObjects(t.Context())
	if err != nil || kept != 1 {
		t.Fatalf("first drain: kept %d, %v; want 1 (web has a connection)", kept, err)
	}
	if _, ok := e.k.IPVS.Service("TCP/10.96.0.20:5432"); ok {
		t.Error("the idle virtual server stayed")
	}
	if _, ok := e.k.IPVS.Service("TCP/10.96.0.10:80"); !ok {
		t.Error("the virtual server carrying a connection went")
	}
	if !slices.Contains(e.k.Netlink.Links(), ipvs.DummyInterface) {
		t.Errorf("%s went while a virtual server still needs its address", ipvs.DummyInterface)
	}

	if err := e.k.IPVS.SetConnections("TCP/10.96.0.10:80", "10.244.1.2:8080", 0, 0); err != nil {
		t.Fatal(err)
	}
	kept, err = e.b.DrainKernelObjects(t.Context())
	if err != nil || kept != 0 {
		t.Fatalf("second drain: kept %d, %v; want 0", kept, err)
	}
	if n := len(e.k.IPVS.Services()); n != 0 {
		t.Errorf("%d virtual servers left", n)
	}
	if slices.Contains(e.k.Netlink.Links(), ipvs.DummyInterface) {
		t.Errorf("%s left", ipvs.DummyInterface)
	}
	if sets := e.k.IPSet.Names(); len(sets) != 0 {
		t.Errorf("sets left: %v", sets)
	}
}
