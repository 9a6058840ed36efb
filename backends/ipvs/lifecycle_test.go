package ipvs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
)

func TestSysctlsAndTimeouts(t *testing.T) {
	cases := []struct {
		name    string
		release string
		strict  bool
		want    map[string]string
	}{
		{"6.1 kernel", "6.1.0-56-cloud-amd64", false, map[string]string{
			"net/ipv4/vs/conntrack": "1", "net/ipv4/vs/expire_nodest_conn": "1",
			"net/ipv4/vs/expire_quiescent_template": "1", "net/ipv4/ip_forward": "1",
			"net/ipv4/vs/conn_reuse_mode": "1", "net/ipv4/conf/all/arp_ignore": "0", "net/ipv4/conf/all/arp_announce": "0"}},
		{"5.4 kernel with strict ARP", "5.4.0-150-generic", true, map[string]string{
			"net/ipv4/vs/conntrack": "1", "net/ipv4/vs/expire_nodest_conn": "1",
			"net/ipv4/vs/expire_quiescent_template": "1", "net/ipv4/ip_forward": "1",
			"net/ipv4/vs/conn_reuse_mode": "0", "net/ipv4/conf/all/arp_ignore": "1", "net/ipv4/conf/all/arp_announce": "2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *sy.Config) {
				cfg.StrictARP = c.strict
				cfg.TCPTimeout, cfg.UDPTimeout = 2*time.Hour, 10*time.Second
			})
			e.k.Sysctl.Put("kernel/osrelease", c.release)
			e.sync(nil)
			got := e.k.Sysctl.Values()
			delete(got, "kernel/osrelease")
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("sysctls (-want +got):\n%s", diff)
			}
			cfg, _ := e.k.IPVS.GetConfig()
			if cfg.TimeoutTCP != 2*time.Hour || cfg.TimeoutTCPFin != 2*time.Minute || cfg.TimeoutUDP != 10*time.Second {
				t.Errorf("IPVS timeouts %+v", cfg)
			}
			n := len(e.k.Sysctl.Sets())
			e.sync(full())
			if len(e.k.Sysctl.Sets()) != n {
				t.Errorf("sysctls written again on a later sync: %v", e.k.Sysctl.Sets()[n:])
			}
		})
	}
}

func TestCleanupLeavesNothing(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080")
	e.svc("empty", "10.96.0.60", 80)
	e.sync(nil)
	before := e.k.IPTables.DumpAll("ipv4")
	if err := e.b.Cleanup(context.Background()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if vs := e.k.IPVS.Services(); len(vs) != 0 {
		t.Errorf("virtual servers left: %+v", vs)
	}
	if links := e.k.Netlink.Links(); !slices.Equal(links, []string{"lo"}) {
		t.Errorf("links left: %v", links)
	}
	if sets := e.k.IPSet.Names(); len(sets) != 0 {
		t.Errorf("sets left: %v", sets)
	}
	after := e.k.IPTables.DumpAll("ipv4")
	if strings.Contains(after, "KUBE-") {
		t.Errorf("rules left:\n%s\n(before:\n%s)", after, before)
	}
	// Cleanup of a clean node is fine, and a sync afterwards rebuilds.
	if err := e.b.Cleanup(context.Background()); err != nil {
		t.Errorf("second Cleanup: %v", err)
	}
	e.sync(changed())
	if e.reals("TCP/10.96.0.10:80") == nil {
		t.Errorf("sync after Cleanup did not rebuild")
	}
}

// A failed sync leaves the previous real servers in force, and the sync
// after it, full as the runner sends it (proxier.Backend: "On error the
// runner retries with a full sync"; proxier's runner tests check that it
// does), brings the change in. The backend keeps no failure flag of its
// own.
func TestFailedSyncThenFullRetry(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080")
	e.sync(nil)
	e.k.IPVS.FailNext("GetService", syscall.EIO)
	e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080")
	if _, err := e.b.Sync(context.Background(), e.state, changed(web)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync error = %v, want EIO", err)
	}
	if got := e.reals("TCP/10.96.0.10:80"); len(got) != 1 {
		t.Errorf("real servers after the failed sync: %v, want the previous one", got)
	}
	if res := e.sync(full()); !res.Full {
		t.Errorf("the retry was not full")
	}
	if got := e.reals("TCP/10.96.0.10:80"); len(got) != 2 {
		t.Errorf("real servers after recovery: %v", got)
	}
}

func TestIPTablesRestoredOnlyWhenChanged(t *testing.T) {
	e := newEnv(t)
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080")
	e.sync(nil)
	n := len(e.k.IPTables.Restores())
	e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080")
	e.sync(changed(web))
	if got := len(e.k.IPTables.Restores()); got != n {
		t.Errorf("an endpoint change restored iptables (%d restores)", got-n)
	}
	e.eps(web) // no endpoints: a REJECT rule appears
	e.sync(changed(web))
	if got := len(e.k.IPTables.Restores()); got != n+1 {
		t.Errorf("restores = %d, want %d", got, n+1)
	}
	if filter := e.k.IPTables.Dump("ipv4", "filter"); !strings.Contains(filter, `"ns/web:p has no endpoints"`) {
		t.Errorf("no REJECT rule:\n%s", filter)
	}
}

func TestMetricsReadTheKernelAtScrapeTime(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	e := newEnv(t, func(c *sy.Config) { c.Registerer = reg })
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080", "10.244.1.3:8080")
	e.sync(nil)
	if err := e.k.IPVS.SetConnections("TCP/10.96.0.10:80", "10.244.1.3:8080", 4, 2); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetGauge().GetValue()
		}
	}
	const act, inact = "switchyard_ipvs_real_server_active_connections", "switchyard_ipvs_real_server_inactive_connections"
	const vs = " virtual_server=TCP/10.96.0.10:80"
	want := map[string]float64{
		"switchyard_ipvs_virtual_servers":           1,
		"switchyard_ipvs_real_servers":              2,
		act + " real_server=10.244.1.2:8080" + vs:   0,
		act + " real_server=10.244.1.3:8080" + vs:   4,
		inact + " real_server=10.244.1.2:8080" + vs: 0,
		inact + " real_server=10.244.1.3:8080" + vs: 2,
		// Shared with every mode, its series present from the start.
		"switchyard_rules_repaired_total ip_family=IPv4 kind=iptables mode=ipvs": 0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
	if _, err := sy.New(sy.Config{Kernel: e.k.Kernel}); err != nil {
		t.Errorf("New without a Registerer: %v", err)
	}
}
