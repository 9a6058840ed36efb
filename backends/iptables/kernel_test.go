package iptables

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/internal/kerneltest"
	"github.com/switchyard-proxy/switchyard/internal/nfacct"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestKernelSyncPayloads feeds the render of every golden State to the
// real iptables-restore (nft and legacy, IPv4 and IPv6) through the real
// runner inside throwaway namespaces: a full sync is accepted and installs
// every rendered rule, a restarted daemon's first sync and a second sync
// change nothing, a partial sync after
// a one-endpoint change leaves exactly what a fresh full sync of the new
// State leaves, and Cleanup removes every KUBE-* chain but leaves another
// program's chain alone.
func TestKernelSyncPayloads(t *testing.T) {
	kerneltest.Require(t)
	for _, mode := range kernelModes() {
		t.Run(mode, func(t *testing.T) {
			for _, tc := range goldenCases() {
				t.Run(tc.name, func(t *testing.T) { kernelPayloadCase(t, mode, tc) })
			}
		})
	}
}

func kernelPayloadCase(t *testing.T, mode string, tc goldenCase) {
	cfg := *testConfig()
	if tc.config != nil {
		tc.config(&cfg)
	}
	ctx := context.Background()
	ns := newRulesNetns(t, mode, &cfg)
	be := newKernelBackend(t, cfg, mode, ns)
	if res, err := be.Sync(ctx, tc.state, fullDiff()); err != nil || !res.Full {
		t.Fatalf("first Sync = %+v, %v; want a full sync accepted", res, err)
	}
	first := dumpAll(t, ns, mode, &cfg)
	for _, fam := range cfg.families() {
		checkInstalled(t, first[runnerFamily(fam)], Render(cfg, tc.state, fam))
	}

	// A restarted daemon's first sync (its survey of the tables finds
	// every jump in place, as iptables-save prints it) adds nothing.
	if _, err := newKernelBackend(t, cfg, mode, ns).Sync(ctx, tc.state, fullDiff()); err != nil {
		t.Fatalf("first Sync after a restart: %v", err)
	}
	if d := cmp.Diff(first, dumpAll(t, ns, mode, &cfg)); d != "" {
		t.Errorf("a restarted daemon's first sync changed the kernel (-first +now):\n%s", d)
	}
	if _, err := be.Sync(ctx, tc.state, fullDiff()); err != nil {
		t.Fatalf("second full Sync: %v", err)
	}
	if res, err := be.Sync(ctx, tc.state, changedDiff(false)); err != nil || res.Full {
		t.Fatalf("empty partial Sync = %+v, %v; want a partial sync accepted", res, err)
	}
	if d := cmp.Diff(first, dumpAll(t, ns, mode, &cfg)); d != "" {
		t.Errorf("syncing the same State again changed the kernel (-first +now):\n%s", d)
	}

	next, name := changeOneEndpoint(t, tc.state)
	if res, err := be.Sync(ctx, next, changedDiff(false, name)); err != nil || res.Full {
		t.Fatalf("one-endpoint Sync = %+v, %v; want a partial sync accepted", res, err)
	}
	ref := newRulesNetns(t, mode, &cfg)
	if _, err := newKernelBackend(t, cfg, mode, ref).Sync(ctx, next, fullDiff()); err != nil {
		t.Fatalf("reference full Sync: %v", err)
	}
	if d := cmp.Diff(dumpAll(t, ref, mode, &cfg), dumpAll(t, ns, mode, &cfg)); d != "" {
		t.Errorf("after the partial sync the kernel differs from a fresh full sync (-fresh +partial):\n%s", d)
	}

	// A service port goes and another comes: the top-level chains are
	// edited in place (-D, -I N), and must end as a full sync writes them.
	next, names := swapServicePorts(next)
	if res, err := be.Sync(ctx, next, changedDiff(true, names...)); err != nil || res.Full {
		t.Fatalf("service add/delete Sync = %+v, %v; want a partial sync accepted", res, err)
	}
	ref = newRulesNetns(t, mode, &cfg)
	if _, err := newKernelBackend(t, cfg, mode, ref).Sync(ctx, next, fullDiff()); err != nil {
		t.Fatalf("reference full Sync: %v", err)
	}
	if d := cmp.Diff(dumpAll(t, ref, mode, &cfg), dumpAll(t, ns, mode, &cfg)); d != "" {
		t.Errorf("after adding and deleting services the kernel differs from a fresh full sync (-fresh +partial):\n%s", d)
	}

	if err := be.Cleanup(ctx); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	for fam, d := range dumpAll(t, ns, mode, &cfg) {
		checkForeignRules(t, d, fam)
		checkNoKubeChains(t, d, fam)
	}
}

// newRulesNetns creates a namespace holding another program's rules in
// every family of cfg.
func newRulesNetns(t *testing.T, mode string, cfg *Config) string {
	ns := kerneltest.NewNetns(t, "syipt-"+"rules")
	for _, fam := range cfg.families() {
		addForeignRules(t, ns, mode, runnerFamily(fam))
	}
	if cfg.NFAcct {
		ensureNFAcct(t, ns)
	}
	return ns
}

// ensureNFAcct creates kube-proxy's counters in ns, as the daemon does
// before it builds the backend.
func ensureNFAcct(t *testing.T, ns string) {
	t.Helper()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n, err := nfacct.New(h)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, c := range []string{nfacct.CTStateInvalidDropped, nfacct.LocalhostNodePortsAccepted} {
		if err := n.Ensure(c); err != nil {
			t.Fatal(err)
		}
	}
}

func dumpAll(t *testing.T, ns, mode string, cfg *Config) map[runner.Family]tableDump {
	out := map[runner.Family]tableDump{}
	for _, fam := range cfg.families() {
		out[runnerFamily(fam)] = kernelDump(t, ns, mode, runnerFamily(fam))
	}
	return out
}

// checkInstalled asserts the kernel holds every chain of the ruleset with
// the same rules, as iptables-save prints them back (canonicalRule), and
// the jumps from the built-in chains.
func checkInstalled(t *testing.T, d tableDump, rs *Ruleset) {
	t.Helper()
	canon := func(rules []string) []string {
		out := make([]string, len(rules))
		for i, r := range rules {
			out[i] = canonicalRule(r)
		}
		return out
	}
	for _, c := range rs.chains() {
		key := string(c.key.table) + "/" + c.key.name
		got, ok := d[key]
		if !ok {
			t.Errorf("%s: chain %s not in the kernel", rs.family, key)
			continue
		}
		if diff := cmp.Diff(canon(c.rules), canon(got)); diff != "" {
			t.Errorf("%s: chain %s in the kernel differs from the render (-rendered +kernel):\n%s", rs.family, key, diff)
		}
	}
	for _, j := range jumpRules(false, false, rs.family == v1.IPv4Protocol) {
		key := string(j.table) + "/" + j.from
		if !slices.ContainsFunc(d[key], func(r string) bool { return strings.HasSuffix(r, "-j "+j.to) }) {
			t.Errorf("%s: no jump from %s to %s: %q", rs.family, key, j.to, d[key])
		}
	}
}

// checkNoKubeChains asserts nothing of ours is left. KUBE-FIREWALL is
// kubelet's chain (written with localhost NodePorts), which Cleanup leaves.
func checkNoKubeChains(t *testing.T, d tableDump, fam runner.Family) {
	t.Helper()
	for key, rules := range d.without("KUBE-FIREWALL") {
		if strings.Contains(key, "KUBE-") {
			t.Errorf("%s: chain %s left after Cleanup", fam, key)
		}
		for _, r := range rules {
			if strings.Contains(r, "KUBE-") {
				t.Errorf("%s: rule left after Cleanup: %s", fam, r)
			}
		}
	}
}

// changeOneEndpoint returns a copy of st in which the first service port
// with endpoints has its first endpoint moved to a new address.
func changeOneEndpoint(t *testing.T, st *proxier.State) (*proxier.State, proxier.ServicePortName) {
	t.Helper()
	next := *st
	next.Endpoints = maps.Clone(st.Endpoints)
	for _, n := range slices.SortedFunc(maps.Keys(st.Endpoints), compareNames) {
		eps := slices.Clone(st.Endpoints[n])
		if len(eps) == 0 {
			continue
		}
		eps[0].IP = netip.MustParseAddr("10.244.99.99")
		if eps[0].IP.Is4() != st.Endpoints[n][0].IP.Is4() {
			eps[0].IP = netip.MustParseAddr("fd00:10:244:99::99")
		}
		slices.SortFunc(eps, func(a, b proxier.Endpoint) int { return a.Key().Compare(b.Key()) })
		next.Endpoints[n] = eps
		return &next, n
	}
	t.Fatal("no service port with endpoints")
	return nil, proxier.ServicePortName{}
}

// swapServicePorts deletes the first service port and adds a copy of the
// last one under a name that sorts right after it, so its rules land
// between others in the top-level chains.
func swapServicePorts(st *proxier.State) (*proxier.State, []proxier.ServicePortName) {
	next := *st
	next.Services, next.Endpoints = maps.Clone(st.Services), maps.Clone(st.Endpoints)
	sorted := slices.SortedFunc(maps.Keys(st.Services), compareNames)
	gone, model := sorted[0], sorted[len(sorted)-1]
	delete(next.Services, gone)
	delete(next.Endpoints, gone)
	added := *st.Services[model]
	added.Name.Name += "-copy"
	next.Services[added.Name] = &added
	next.Endpoints[added.Name] = st.Endpoints[model]
	return &next, []proxier.ServicePortName{gone, added.Name}
}

// TestKernelSaveableAfterBigSync: after a first sync of 1k services x 4
// endpoints (5k chains) on iptables-nft, iptables-nft-save still works
// with a 256 KiB stack. iptables-nft 1.8.9 sorts the chains it reads with
// a recursion as deep as the run of chains created in name order: 5k
// chains declared sorted crash it at 512 KiB, and the ~100k chains of 10k
// services x 10 endpoints crash it at the default 8 MiB.
func TestKernelSaveableAfterBigSync(t *testing.T) {
	kerneltest.Require(t)
	cfg := *testConfig()
	ns := kerneltest.NewNetns(t, "syipt-save")
	be := newKernelBackend(t, cfg, runner.ModeNFT, ns)
	if _, err := be.Sync(context.Background(), bigState(1000, 4), fullDiff()); err != nil {
		t.Fatal(err)
	}
	out := nsRun(t, ns, "sh", "-c", "ulimit -s 256; iptables-nft-save -t nat | grep -c '^:KUBE-SEP-'")
	if got := strings.TrimSpace(out); got != "4000" {
		t.Errorf("iptables-nft-save listed %s KUBE-SEP chains, want 4000", got)
	}
}
