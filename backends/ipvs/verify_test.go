package ipvs_test

import (
	"bytes"
	"context"
	"maps"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/ipvs"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/backends/ipvs/ipvstest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/flowtest"
)

// repairEnv is a dual-stack backend on a fake node programmed with the
// shared packet-flow fixture plus a firewalled LoadBalancer service.
type repairEnv struct {
	t     *testing.T
	k     *ipvstest.Kernel
	b     *sy.Backend
	reg   *prometheus.Registry
	state *proxier.State
	model *ipvstest.FlowModel
}

func newRepairEnv(t *testing.T) *repairEnv {
	t.Helper()
	state, node := flowtest.Fixture()
	addFirewalledService(state)
	k := ipvstest.NewKernel()
	reg := prometheus.NewPedanticRegistry()
	b, err := sy.New(sy.Config{Kernel: k.Kernel, Families: []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol},
		LocalDetector: node.LocalDetector, Registerer: reg})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e := &repairEnv{t: t, k: k, b: b, reg: reg, state: state, model: k.FlowModel(node.NodeIPs)}
	e.sync(nil)
	return e
}

// addFirewalledService adds a dual-stack LoadBalancer service with
// loadBalancerSourceRanges whose only endpoints are on another node.
func addFirewalledService(st *proxier.State) {
	n := spn("fw", v1.ProtocolTCP)
	st.Services[n] = &proxier.ServicePort{Name: n, Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30091,
		ClusterIPs:      []netip.Addr{netip.MustParseAddr("10.96.0.90"), netip.MustParseAddr("fd00:10:96::90")},
		LoadBalancerIPs: []netip.Addr{netip.MustParseAddr("198.51.100.90"), netip.MustParseAddr("2001:db8:100::90")},
		LoadBalancerSourceRanges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"),
			netip.MustParsePrefix("2001:db8:ffff::/48")}}
	st.Endpoints[n] = []proxier.Endpoint{
		{IP: netip.MustParseAddr("10.244.2.91"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"},
		{IP: netip.MustParseAddr("fd00:10:244:2::91"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b"},
	}
}

// repairCases are the traffic checks, in both families, on top
// of the shared table: source ranges enforced at the LB IP, NodePort and
// the node to a cluster IP reaching a remote endpoint (masqueraded), a
// pod reaching itself through its service (hairpin, masqueraded).
func repairCases() []flowtest.Case {
	tcp := func(src string, local bool, dst string, port uint16) flowtest.Packet {
		return flowtest.Packet{SrcIP: netip.MustParseAddr(src), SrcLocal: local, DstIP: netip.MustParseAddr(dst),
			DstPort: port, Protocol: v1.ProtocolTCP}
	}
	masq := func(eps ...string) flowtest.Expect {
		return flowtest.Expect{Endpoints: eps, Masquerade: true, MasqChecked: true}
	}
	fw4, fw6 := "10.244.2.91:8080", "[fd00:10:244:2::91]:8080"
	lb := []string{"10.244.1.20:8080", "10.244.2.21:8080"}
	web6 := []string{"[fd00:10:244:1::2]:8080", "[fd00:10:244:2::3]:8080"}
	return []flowtest.Case{
		{Name: "client inside the source ranges reaches the LB IP", Packet: tcp("203.0.113.7", false, "198.51.100.90", 80), Expect: masq(fw4)},
		{Name: "client outside the source ranges is dropped at the LB IP", Packet: tcp("192.0.2.99", false, "198.51.100.90", 80), Expect: flowtest.Expect{Drop: true}},
		{Name: "IPv6 client inside the source ranges reaches the LB IP", Packet: tcp("2001:db8:ffff::7", false, "2001:db8:100::90", 80), Expect: masq(fw6)},
		{Name: "IPv6 client outside the source ranges is dropped at the LB IP", Packet: tcp("2001:db8:eeee::7", false, "2001:db8:100::90", 80), Expect: flowtest.Expect{Drop: true}},
		{Name: "NodePort to a remote endpoint is masqueraded", Packet: tcp("203.0.113.7", false, "192.168.0.10", 30091), Expect: masq(fw4)},
		{Name: "IPv6 NodePort to a remote endpoint is masqueraded", Packet: tcp("2001:db8:ffff::7", false, "2001:db8::10", 30091), Expect: masq(fw6)},
		{Name: "node to a cluster IP with a remote endpoint is masqueraded", Packet: tcp("192.168.0.10", true, "10.96.0.90", 80), Expect: masq(fw4)},
		{Name: "IPv6 node to a cluster IP with a remote endpoint is masqueraded", Packet: tcp("2001:db8::10", true, "fd00:10:96::90", 80), Expect: masq(fw6)},
		{Name: "pod to its own service (hairpin) is masqueraded", Packet: tcp("10.244.1.20", false, "10.96.0.20", 80), Expect: masq(lb...)},
		{Name: "IPv6 pod to its own service (hairpin) is masqueraded", Packet: tcp("fd00:10:244:1::2", false, "fd00:10:96::10", 80), Expect: masq(web6...)},
	}
}

// wrongFlows runs the shared table and the repair cases and returns the
// names of the cases the fake node gets wrong.
func (e *repairEnv) wrongFlows() []string {
	var wrong []string
	for _, c := range append(flowtest.Cases(), repairCases()...) {
		got, err := e.model.Flow(c.Packet)
		if err != nil || flowtest.Diff(c.Expect, got) != "" {
			wrong = append(wrong, c.Name)
		}
	}
	return wrong
}

func (e *repairEnv) sync(diff *proxier.Diff) {
	e.t.Helper()
	if _, err := e.b.Sync(context.Background(), e.state, diff); err != nil {
		e.t.Fatalf("Sync: %v", err)
	}
}

func verifySync() *proxier.Diff { return &proxier.Diff{Verify: true} }

// writes counts every state-changing call the fakes recorded.
func (e *repairEnv) writes() int {
	return len(e.k.IPVS.Ops()) + len(e.k.Netlink.Ops()) + len(e.k.IPSet.Restores()) + len(e.k.IPTables.Restores())
}

func (e *repairEnv) repaired(kind, family string) float64 {
	return e.counter("switchyard_ipvs_state_repaired_total", map[string]string{"kind": kind, "family": family})
}

// rulesRepaired reads the shared switchyard_rules_repaired_total (family
// "ipv4" or "ipv6", as the deprecated counter's label).
func (e *repairEnv) rulesRepaired(kind, family string) float64 {
	fam := map[string]string{"ipv4": "IPv4", "ipv6": "IPv6"}[family]
	return e.counter("switchyard_rules_repaired_total", map[string]string{"mode": "ipvs", "kind": kind, "ip_family": fam})
}

// counter is the value of the series of name with all the labels.
func (e *repairEnv) counter(name string, want map[string]string) float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if maps.Equal(labels, want) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// logBuffer captures klog output for the test's duration.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func captureLogs(t *testing.T) *logBuffer {
	buf := &logBuffer{}
	klog.LogToStderr(false)
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.LogToStderr(true)
		klog.SetOutput(os.Stderr)
	})
	return buf
}

// tcpService names a TCP virtual server for the fake's IPVS calls.
func tcpService(addr string, port uint16) *ipvs.Service {
	a := netip.MustParseAddr(addr)
	fam := uint16(2)
	if a.Is6() {
		fam = 10
	}
	return &ipvs.Service{AddressFamily: fam, Protocol: 6, Address: a.AsSlice(), Port: port}
}

// wipeIPTables does what a firewall reload does in both families: every
// chain of nat, filter and mangle flushed, then every non-built-in chain
// deleted.
func wipeIPTables(k *ipvstest.Kernel) error {
	for _, fam := range []runner.Family{runner.IPv4, runner.IPv6} {
		for _, table := range []string{"mangle", "nat", "filter"} {
			chains := k.IPTables.Chains(fam, table)
			for _, c := range chains {
				if err := k.IPTables.FlushChain(fam, table, c); err != nil {
					return err
				}
			}
			for _, c := range chains {
				if !runner.IsBuiltinChain(c) {
					if err := k.IPTables.DeleteChain(fam, table, c); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func ipsetRestore(k *ipvstest.Kernel, lines ...string) error {
	return k.IPSet.Restore(context.Background(), []byte(strings.Join(lines, "\n")+"\n"))
}

// damages are the damages, each with the repair kind and family
// it must be counted under and a word the repair log line must hold.
func damages() []struct {
	name, kind, family, logs string
	do                       func(k *ipvstest.Kernel) error
} {
	del := func(svc *ipvs.Service) func(k *ipvstest.Kernel) error {
		return func(k *ipvstest.Kernel) error { return k.IPVS.DelService(svc) }
	}
	return []struct {
		name, kind, family, logs string
		do                       func(k *ipvstest.Kernel) error
	}{
		{"iptables tables flushed and chains deleted", "iptables", "ipv4", "IPv4 chain filter/KUBE-SERVICES is gone", wipeIPTables},
		{"iptables tables flushed and chains deleted (IPv6 counted)", "iptables", "ipv6", "IPv6 chain filter/KUBE-FORWARD is gone", wipeIPTables},
		{"one ipset flushed", "ipset", "ipv4", "set KUBE-LOOP-BACK lacks", func(k *ipvstest.Kernel) error {
			return ipsetRestore(k, "flush KUBE-LOOP-BACK")
		}},
		{"one IPv6 ipset flushed", "ipset", "ipv6", "set KUBE-6-LOAD-BALANCER-FW lacks", func(k *ipvstest.Kernel) error {
			return ipsetRestore(k, "flush KUBE-6-LOAD-BALANCER-FW")
		}},
		// The kernel refuses to destroy a set a rule uses: the rules that
		// match it go first.
		{"one ipset destroyed", "ipset", "ipv4", "set KUBE-LOAD-BALANCER-FW is gone", func(k *ipvstest.Kernel) error {
			if err := k.IPTables.FlushChain(runner.IPv4, "filter", "KUBE-SOURCE-RANGES-FIREWALL"); err != nil {
				return err
			}
			return ipsetRestore(k, "destroy KUBE-LOAD-BALANCER-FW")
		}},
		{"kube-ipvs0 deleted", "interface", "ipv6", "interface kube-ipvs0 is gone", func(k *ipvstest.Kernel) error {
			return k.Netlink.DeleteLink(sy.DummyInterface)
		}},
		{"one address removed from kube-ipvs0", "interface", "ipv4", "1 IPv4 addresses missing", func(k *ipvstest.Kernel) error {
			return k.Netlink.DelAddress(sy.DummyInterface, netip.MustParseAddr("198.51.100.90"))
		}},
		{"one IPv6 address removed from kube-ipvs0", "interface", "ipv6", "1 IPv6 addresses missing", func(k *ipvstest.Kernel) error {
			return k.Netlink.DelAddress(sy.DummyInterface, netip.MustParseAddr("fd00:10:96::10"))
		}},
		{"one virtual server deleted", "virtual_server", "ipv4", "virtual server TCP/198.51.100.90:80 is gone", del(tcpService("198.51.100.90", 80))},
		{"one IPv6 virtual server deleted", "virtual_server", "ipv6", "virtual server TCP/[2001:db8::10]:30091 is gone", del(tcpService("2001:db8::10", 30091))},
		{"one real server deleted", "real_server", "ipv4", "real server 10.244.2.21:8080 of TCP/10.96.0.20:80 is gone", func(k *ipvstest.Kernel) error {
			return k.IPVS.DelDestination(tcpService("10.96.0.20", 80), &ipvs.Destination{Address: netip.MustParseAddr("10.244.2.21").AsSlice(), Port: 8080})
		}},
		{"one IPv6 real server deleted", "real_server", "ipv6", "real server [fd00:10:244:1::2]:8080 of TCP/[fd00:10:96::10]:80 is gone", func(k *ipvstest.Kernel) error {
			return k.IPVS.DelDestination(tcpService("fd00:10:96::10", 80), &ipvs.Destination{Address: netip.MustParseAddr("fd00:10:244:1::2").AsSlice(), Port: 8080})
		}},
	}
}

// TestVerifyRepairsEachDamage: after each damage some packet flows go
// wrong; one periodic (Verify) sync puts every flow back, logs what was
// missing and counts the repair; the next one writes nothing.
func TestVerifyRepairsEachDamage(t *testing.T) {
	for _, c := range damages() {
		t.Run(c.name, func(t *testing.T) {
			e := newRepairEnv(t)
			if wrong := e.wrongFlows(); len(wrong) != 0 {
				t.Fatalf("flows wrong before any damage: %q", wrong)
			}
			if err := c.do(e.k); err != nil {
				t.Fatalf("damage: %v", err)
			}
			if wrong := e.wrongFlows(); len(wrong) == 0 {
				t.Fatalf("the damage changed no packet flow: the test proves nothing")
			}
			logs := captureLogs(t)
			e.sync(verifySync())
			if wrong := e.wrongFlows(); len(wrong) != 0 {
				t.Errorf("flows still wrong after a verifying sync: %q\n%s", wrong, e.k.IPVS.Dump())
			}
			if !strings.Contains(logs.String(), c.logs) {
				t.Errorf("repair log lacks %q:\n%s", c.logs, logs)
			}
			if got := e.repaired(c.kind, c.family); got != 1 {
				t.Errorf("switchyard_ipvs_state_repaired_total{kind=%q,family=%q} = %v, want 1", c.kind, c.family, got)
			}
			if got := e.rulesRepaired(c.kind, c.family); got != 1 {
				t.Errorf("switchyard_rules_repaired_total{mode=\"ipvs\",kind=%q,ip_family of %q} = %v, want 1", c.kind, c.family, got)
			}
			e.assertVerifyWritesNothing()
		})
	}
}

// assertVerifyWritesNothing runs a verifying sync on an intact node.
func (e *repairEnv) assertVerifyWritesNothing() {
	e.t.Helper()
	before := e.writes()
	e.sync(verifySync())
	if after := e.writes(); after != before {
		e.t.Errorf("a verifying sync of an intact node wrote %d times: IPVS %q, netlink %q", after-before,
			e.k.IPVS.Ops(), e.k.Netlink.Ops())
	}
}

func TestVerifyOfAnIntactNodeWritesNothing(t *testing.T) {
	e := newRepairEnv(t)
	logs := captureLogs(t)
	e.assertVerifyWritesNothing()
	if strings.Contains(logs.String(), "repair") {
		t.Errorf("an intact node logged a repair:\n%s", logs)
	}
	for _, kind := range []string{"iptables", "ipset", "interface", "virtual_server", "real_server"} {
		if got := e.repaired(kind, "ipv4") + e.repaired(kind, "ipv6"); got != 0 {
			t.Errorf("%s repairs counted on an intact node: %v", kind, got)
		}
	}
}

// fingerprintRunner is the iptables fake with a fingerprint that moves
// on every write, like the nf_tables generation, and counts the reads
// verification makes.
type fingerprintRunner struct {
	*iptablestest.Fake
	external int // writes by "someone else"
	reads    int
}

func (f *fingerprintRunner) Fingerprint(context.Context, runner.Family) (uint64, error) {
	return uint64(len(f.Restores()) + f.external), nil
}

func (f *fingerprintRunner) ChainUses(ctx context.Context, fam runner.Family) (map[string]map[string]int, error) {
	f.reads++
	return f.Fake.ChainUses(ctx, fam)
}

func (f *fingerprintRunner) SaveTable(ctx context.Context, fam runner.Family, table string) ([]byte, error) {
	f.reads++
	return f.Fake.SaveTable(ctx, fam, table)
}

// TestVerifyReadsNoRulesWhileTheFingerprintHolds: verification reads no
// iptables rules while nobody else wrote; a flush is found by the next
// verifying sync even when a partial sync (which does not verify) ran
// in between: that sync must not take the moved fingerprint as its own.
func TestVerifyReadsNoRulesWhileTheFingerprintHolds(t *testing.T) {
	e := newRepairEnv(t)
	fr := &fingerprintRunner{Fake: e.k.IPTables}
	e.k.Kernel.IPTables = fr // the backend shares the Kernel
	e.sync(&proxier.Diff{Full: true})
	fr.reads = 0
	e.sync(verifySync())
	if fr.reads != 0 {
		t.Errorf("verification read the rules %d times while the fingerprint held", fr.reads)
	}
	fr.external++
	if err := fr.FlushChain(runner.IPv4, "nat", "KUBE-POSTROUTING"); err != nil {
		t.Fatal(err)
	}
	e.sync(changed()) // a partial sync: no verification
	if wrong := e.wrongFlows(); len(wrong) == 0 {
		t.Fatalf("flushing KUBE-POSTROUTING changed no flow")
	}
	e.sync(verifySync())
	if wrong := e.wrongFlows(); len(wrong) != 0 {
		t.Errorf("flows wrong after the verifying sync: %q", wrong)
	}
	if got := e.repaired("iptables", "ipv4"); got != 1 {
		t.Errorf("iptables repairs = %v, want 1", got)
	}
	fr.reads = 0
	e.sync(verifySync())
	if fr.reads != 0 {
		t.Errorf("verification after the repair read the rules %d times", fr.reads)
	}
}

// TestPartialSyncVerifiesOnceTheCheckIsOld: changes that keep arriving
// postpone the periodic sync, so a partial sync verifies once the last
// check is older than Config.VerifyInterval, and not before.
func TestPartialSyncVerifiesOnceTheCheckIsOld(t *testing.T) {
	e := newEnv(t, func(c *sy.Config) { c.VerifyInterval = 20 * time.Second })
	web := e.svc("web", "10.96.0.10", 80)
	e.eps(web, "10.244.1.2:8080", "10.244.2.3:8080@")
	e.sync(nil)
	key := tcpService("10.96.0.10", 80)
	if err := e.k.IPVS.DelDestination(key, &ipvs.Destination{Address: netip.MustParseAddr("10.244.2.3").AsSlice(), Port: 8080}); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(19 * time.Second)
	e.sync(changed())
	if got := e.reals("TCP/10.96.0.10:80"); len(got) != 1 {
		t.Fatalf("a partial sync 19 s after the last check verified: real servers %v", got)
	}
	e.clock.Step(time.Second)
	e.sync(changed())
	if got := e.reals("TCP/10.96.0.10:80"); len(got) != 2 {
		t.Errorf("a partial sync 20 s after the last check did not repair: real servers %v", got)
	}
}
