package ipvs_test

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	sy "github.com/switchyard-proxy/switchyard/backends/ipvs"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// benchState is n ClusterIP services with eps endpoints each.
func benchState(n, eps int) *proxier.State {
	st := &proxier.State{
		Services:  map[proxier.ServicePortName]*proxier.ServicePort{},
		Endpoints: map[proxier.ServicePortName][]proxier.Endpoint{},
		Node:      proxier.NodeInfo{Name: "node-a", Addresses: []netip.Addr{netip.MustParseAddr(vmNodeIP)}},
	}
	for i := range n {
		name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i)},
			Port: "http", Protocol: v1.ProtocolTCP}
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		st.Services[name] = &proxier.ServicePort{Name: name, Protocol: v1.ProtocolTCP, Port: 80, ClusterIPs: []netip.Addr{ip}}
		var list []proxier.Endpoint
		for j := range eps {
			k := i*eps + j
			list = append(list, proxier.Endpoint{IP: netip.AddrFrom4([4]byte{10, byte(128 + k>>16), byte(k >> 8), byte(k)}), Port: 8080,
				Ready: true, Serving: true, NodeName: "node-b"})
		}
		slices.SortFunc(list, func(a, b proxier.Endpoint) int { return a.Key().Compare(b.Key()) })
		st.Endpoints[name] = list
	}
	return st
}

// TestKernelSyncBench measures IPVS sync times in the VM's kernel for 1k
// and 10k services x 10 endpoints. Enable with SWITCHYARD_IPVS_BENCH=1
// (or =N: N services only).
// The VM runs under TCG (no KVM here), so the figures are pessimistic:
// every netlink call and exec goes through an emulated CPU.
func TestKernelSyncBench(t *testing.T) {
	requireVM(t)
	if os.Getenv("SWITCHYARD_IPVS_BENCH") == "" {
		t.Skip("set SWITCHYARD_IPVS_BENCH=1")
	}
	var flags flag.FlagSet
	klog.InitFlags(&flags)
	_ = flags.Set("v", "2") // the sync log line has the phase durations
	defer func() { _ = flags.Set("v", "0") }()
	newNamedNetns(t, "sy-bench")
	k, err := sy.NewKernel("sy-bench")
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	sizes := []int{1000, 10000}
	if n, err := strconv.Atoi(os.Getenv("SWITCHYARD_IPVS_BENCH")); err == nil && n > 1 {
		sizes = []int{n} // SWITCHYARD_IPVS_BENCH=10000: that size only
	}
	for _, n := range sizes {
		b, err := sy.New(sy.Config{Kernel: k, LocalDetector: proxier.DetectByClusterCIDRs(clusterCIDR)})
		if err != nil {
			t.Fatal(err)
		}
		st := benchState(n, 10)
		timed := func(what string, diff *proxier.Diff) time.Duration {
			start, cpu := time.Now(), kerneltest.ProcessCPU()
			if _, err := b.Sync(context.Background(), st, diff); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			d := time.Since(start)
			fmt.Printf("BENCH services=%d endpoints=%d %-44s %8.3fs cpu %8.3fs\n", n, n*10, what, d.Seconds(),
				(kerneltest.ProcessCPU() - cpu).Seconds())
			return d
		}
		timed("first sync (empty kernel)", nil)
		timed("full resync, nothing changed", full())
		benchRepairs(t, n, timed)
		var partial []time.Duration
		for i := range 5 {
			name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: fmt.Sprintf("svc-%d", i*97%n)},
				Port: "http", Protocol: v1.ProtocolTCP}
			eps := slices.Clone(st.Endpoints[name])
			eps[0].IP = netip.AddrFrom4([4]byte{10, 250, byte(i), 1})
			slices.SortFunc(eps, func(a, b proxier.Endpoint) int { return a.Key().Compare(b.Key()) })
			st.Endpoints[name] = eps
			partial = append(partial, timed("partial, one endpoint changed", changed(name)))
		}
		slices.Sort(partial)
		fmt.Printf("BENCH services=%d partial one-endpoint median %.3fs\n", n, partial[len(partial)/2].Seconds())
		name := proxier.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "bench", Name: "svc-1"}, Port: "http", Protocol: v1.ProtocolTCP}
		st.Endpoints[name] = st.Endpoints[name][1:]
		timed("full, one endpoint changed", full())
		start := time.Now()
		if err := b.Cleanup(context.Background()); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("BENCH services=%d %-34s %8.3fs\n", n, "Cleanup", time.Since(start).Seconds())
	}
}

// benchRepairs times verifying syncs: with nothing changed (the
// fingerprint holds), after a foreign iptables write that leaves ours
// alone, and the repair of each damage (iptables only IPv4 here).
func benchRepairs(t *testing.T, n int, timed func(string, *proxier.Diff) time.Duration) {
	verify := &proxier.Diff{Verify: true}
	timed("verify, nothing changed", verify)
	steps := []struct {
		what string
		cmds [][]string
	}{
		{"verify, foreign iptables write only", [][]string{{"iptables", "-t", "filter", "-N", fmt.Sprintf("BENCH-OTHER-%d", n)}}},
		{"repair: nat and filter flushed", [][]string{{"iptables", "-t", "nat", "-F"}, {"iptables", "-t", "filter", "-F"}}},
		{"repair: firewall reload (-F, -X)", [][]string{{"iptables", "-t", "nat", "-F"}, {"iptables", "-t", "filter", "-F"},
			{"iptables", "-t", "nat", "-X"}, {"iptables", "-t", "filter", "-X"}}},
		{"repair: ipset flush KUBE-LOOP-BACK", [][]string{{"ipset", "flush", "KUBE-LOOP-BACK"}}},
		{"repair: kube-ipvs0 deleted", [][]string{{"ip", "link", "del", sy.DummyInterface}}},
		{"repair: one address removed", [][]string{{"ip", "addr", "del", "10.96.0.7/32", "dev", sy.DummyInterface}}},
		{"repair: one virtual server deleted", [][]string{{"ipvsadm", "-D", "-t", "10.96.0.7:80"}}},
		{"repair: one real server deleted", [][]string{{"ipvsadm", "-d", "-t", "10.96.0.8:80", "-r", "10.128.0.80:8080"}}},
	}
	for _, s := range steps {
		for _, c := range s.cmds {
			if err := inNS("sy-bench", c...); err != nil {
				t.Fatal(err)
			}
		}
		timed(s.what, verify)
	}
	timed("verify after the repairs", verify)
}
