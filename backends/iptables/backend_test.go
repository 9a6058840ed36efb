package iptables

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
	"github.com/switchyard-proxy/switchyard/proxier/metrics"
)

func newTestBackend(t testing.TB, fake *iptablestest.Fake, mutate func(*Config)) *Backend {
	t.Helper()
	cfg := testConfig()
	cfg.Runner = fake
	if mutate != nil {
		mutate(cfg)
	}
	b, err := New(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func fullDiff() *proxier.Diff { return &proxier.Diff{Full: true} }

func changedDiff(servicesChanged bool, names ...proxier.ServicePortName) *proxier.Diff {
	d := &proxier.Diff{Changed: map[proxier.ServicePortName]struct{}{}, ServicesChanged: servicesChanged}
	for _, n := range names {
		d.Changed[n] = struct{}{}
	}
	return d
}

func mustSync(t testing.TB, b *Backend, st *proxier.State, d *proxier.Diff) proxier.SyncResult {
	t.Helper()
	res, err := b.Sync(context.Background(), st, d)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	return res
}

// referenceDump is what a fresh node looks like after one full sync of
// state: what any sequence of syncs ending in state must leave.
func referenceDump(t testing.TB, mutate func(*Config), st *proxier.State, fam runner.Family) string {
	t.Helper()
	fake := iptablestest.NewFake()
	mustSync(t, newTestBackend(t, fake, mutate), st, fullDiff())
	return fake.DumpAll(fam)
}

func assertMatchesReference(t testing.TB, fake *iptablestest.Fake, mutate func(*Config), st *proxier.State) {
	t.Helper()
	for _, fam := range []runner.Family{runner.IPv4, runner.IPv6} {
		if d := cmp.Diff(referenceDump(t, mutate, st, fam), fake.DumpAll(fam)); d != "" {
			t.Fatalf("%s tables differ from a fresh full sync (-fresh +got):\n%s", fam, d)
		}
	}
}

// restoresSince returns the payloads sent since the n-th call.
func restoresSince(fake *iptablestest.Fake, n int) []iptablestest.RestoreCall {
	return fake.Restores()[n:]
}

// payloadChains lists the chains a payload declares and deletes.
func payloadChains(data []byte) (declared, deleted []string) {
	var tbl string
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			tbl = line[1:]
		case strings.HasPrefix(line, ":"):
			declared = append(declared, tbl+"/"+strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-X "):
			deleted = append(deleted, tbl+"/"+strings.TrimPrefix(line, "-X "))
		}
	}
	return declared, deleted
}

// TestSyncFullAccepted: every golden state's full sync is accepted by the
// strict fake, installs exactly the rendered rules, and keeps the jumps
// from the built-in chains.
func TestSyncFullAccepted(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			fake := iptablestest.NewFake()
			b := newTestBackend(t, fake, tc.config)
			if res := mustSync(t, b, tc.state, fullDiff()); !res.Full {
				t.Errorf("first sync not reported full")
			}
			for _, f := range b.families {
				// The fake re-quotes comments its own way: compare unquoted.
				unquote := func(s string) string { return strings.ReplaceAll(s, `"`, "") }
				want := ownedRules(unquote(render(f.fc, tc.state).String()), false)
				got := ownedRules(unquote(fake.DumpAll(f.fam)), false)
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%s: installed rules differ from render (-render +installed):\n%s", f.fam, d)
				}
				nat := fake.Dump(f.fam, "nat")
				for _, jump := range []string{"-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
					"-A POSTROUTING -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING"} {
					if !strings.Contains(nat, jump) {
						t.Errorf("%s nat lacks %q:\n%s", f.fam, jump, nat)
					}
				}
			}
			// A second full sync of the same state changes nothing.
			before := fake.DumpAll(runner.IPv4)
			mustSync(t, b, tc.state, fullDiff())
			if d := cmp.Diff(before, fake.DumpAll(runner.IPv4)); d != "" {
				t.Errorf("second full sync changed the tables:\n%s", d)
			}
		})
	}
}

// partialFixture is three services, b a NodePort, with endpoints.
func partialFixture() (*proxier.State, []proxier.ServicePortName) {
	a := svc("ns", "a", "http", v1.ProtocolTCP, 80, "10.96.1.1")
	b := with(svc("ns", "b", "http", v1.ProtocolTCP, 80, "10.96.1.2"), nodePort(30002))
	c := with(svc("ns", "c", "dns", v1.ProtocolUDP, 53, "10.96.1.3"), affinity(60))
	st := stateOf([]string{"192.168.1.10"}, []*proxier.ServicePort{a, b, c}, epMap{
		a.Name: {ep("10.244.1.1:80"), ep("10.244.2.1:80"), ep("10.244.3.1:80")},
		b.Name: {ep("10.244.1.2:80")},
		c.Name: {ep("10.244.1.3:53"), ep("10.244.2.3:53")},
	})
	return st, []proxier.ServicePortName{a.Name, b.Name, c.Name}
}

// TestPartialSyncOneEndpoint: replacing one endpoint rewrites that
// service's KUBE-SVC chain, adds the new KUBE-SEP chain and deletes the
// old one, in one small transaction, and nothing else.
func TestPartialSyncOneEndpoint(t *testing.T) {
	fake := iptablestest.NewFake()
	b := newTestBackend(t, fake, nil)
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	n := len(fake.Restores())

	st = cloneState(st)
	st.Endpoints[names[0]] = []proxier.Endpoint{ep("10.244.1.1:80"), ep("10.244.2.1:80"), ep("10.244.4.1:80")}
	if res := mustSync(t, b, st, changedDiff(false, names[0])); res.Full {
		t.Fatalf("one-endpoint change did a full sync")
	}
	calls := restoresSince(fake, n)
	if len(calls) != 1 {
		t.Fatalf("partial sync made %d restores, want 1", len(calls))
	}
	declared, deleted := payloadChains(calls[0].Data)
	ch := chainsFor(names[0])
	wantDeclared := []string{"nat/" + endpointChainName(names[0], "10.244.4.1:80"), "nat/" + ch.cluster,
		"nat/" + endpointChainName(names[0], "10.244.3.1:80")}
	// On iptables-nft chains are declared in write order: the endpoint
	// chain, the service chain, then the stale one to delete.
	wantDeleted := []string{"nat/" + endpointChainName(names[0], "10.244.3.1:80")}
	if d := cmp.Diff(wantDeclared, declared); d != "" {
		t.Errorf("declared chains (-want +got):\n%s\npayload:\n%s", d, calls[0].Data)
	}
	if d := cmp.Diff(wantDeleted, deleted); d != "" {
		t.Errorf("deleted chains (-want +got):\n%s", d)
	}
	assertMatchesReference(t, fake, nil, st)
}

// TestPartialSyncDispatch: the top-level chains are rewritten only when a
// service's no-endpoints status changes or services change.
func TestPartialSyncDispatch(t *testing.T) {
	fake := iptablestest.NewFake()
	b := newTestBackend(t, fake, nil)
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	steps := []struct {
		name            string
		change          func(*proxier.State)
		changed         proxier.ServicePortName
		servicesChanged bool
		wantDeclared    []string
		// wantEdited are the top-level chains written as a few -I/-D
		// lines rather than declared (flushed) and refilled.
		wantEdited []string
	}{
		{"b loses its endpoints", func(st *proxier.State) { delete(st.Endpoints, names[1]) }, names[1], false,
			[]string{"nat/" + chainsFor(names[1]).external, "nat/" + chainsFor(names[1]).cluster,
				"nat/" + endpointChainName(names[1], "10.244.1.2:80")},
			[]string{"filter/KUBE-EXTERNAL-SERVICES", "filter/KUBE-SERVICES", "nat/KUBE-NODEPORTS", "nat/KUBE-SERVICES"}},
		{"b gets one back", func(st *proxier.State) { st.Endpoints[names[1]] = []proxier.Endpoint{ep("10.244.1.2:80")} }, names[1], false,
			[]string{"nat/" + endpointChainName(names[1], "10.244.1.2:80"), "nat/" + chainsFor(names[1]).cluster,
				"nat/" + chainsFor(names[1]).external},
			[]string{"filter/KUBE-EXTERNAL-SERVICES", "filter/KUBE-SERVICES", "nat/KUBE-NODEPORTS", "nat/KUBE-SERVICES"}},
		{"c deleted", func(st *proxier.State) { delete(st.Services, names[2]); delete(st.Endpoints, names[2]) }, names[2], true,
			[]string{"nat/" + chainsFor(names[2]).cluster,
				"nat/" + endpointChainName(names[2], "10.244.1.3:53"), "nat/" + endpointChainName(names[2], "10.244.2.3:53")},
			[]string{"nat/KUBE-SERVICES"}},
	}
	for _, step := range steps {
		st = cloneState(st)
		step.change(st)
		n := len(fake.Restores())
		if res := mustSync(t, b, st, changedDiff(step.servicesChanged, step.changed)); res.Full {
			t.Fatalf("%s: full sync", step.name)
		}
		var declared, edited []string
		for _, c := range restoresSince(fake, n) {
			d, _ := payloadChains(c.Data)
			declared = append(declared, d...)
			edited = append(edited, editedChains(c.Data)...)
		}
		for _, l := range [][]string{declared, edited, step.wantDeclared, step.wantEdited} {
			slices.Sort(l)
		}
		if d := cmp.Diff(step.wantDeclared, declared); d != "" {
			t.Errorf("%s: declared chains (-want +got):\n%s", step.name, d)
		}
		if d := cmp.Diff(step.wantEdited, slices.Compact(edited)); d != "" {
			t.Errorf("%s: edited chains (-want +got):\n%s", step.name, d)
		}
		assertMatchesReference(t, fake, nil, st)
	}
}

// editedChains lists the chains a payload edits with -I or -D, once per
// line.
func editedChains(data []byte) []string {
	var out []string
	var tbl string
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			tbl = line[1:]
		case strings.HasPrefix(line, "-I ") || strings.HasPrefix(line, "-D "):
			out = append(out, tbl+"/"+strings.Fields(line)[1])
		}
	}
	return out
}

// TestCanaryGoneForcesFullSync: when our tables were flushed and the
// canary deleted, the next sync rewrites everything even if the Diff
// names one service.
func TestCanaryGoneForcesFullSync(t *testing.T) {
	for _, tbl := range []string{"mangle", "nat", "filter"} {
		t.Run(tbl, func(t *testing.T) {
			fake := iptablestest.NewFake()
			b := newTestBackend(t, fake, nil)
			st, names := partialFixture()
			mustSync(t, b, st, fullDiff())
			if err := fake.DeleteChain(runner.IPv4, tbl, chainCanary); err != nil {
				t.Fatal(err)
			}
			// A change-driven partial sync does not look (on legacy each
			// look reads a whole table); the next periodic one does.
			if res := mustSync(t, b, st, changedDiff(false, names[0])); res.Full {
				t.Errorf("change-driven sync checked the canary and went full")
			}
			periodic := changedDiff(false)
			periodic.Verify = true
			if res := mustSync(t, b, st, periodic); !res.Full {
				t.Errorf("periodic sync after canary removal was partial")
			}
			assertMatchesReference(t, fake, nil, st)
		})
	}
}

// TestChainDeletedBehindOurBack: a chain removed by someone else makes the
// partial sync that relies on it fail (the fake, like iptables, rejects
// the jump); the previous rules stay and the next sync is full and heals.
func TestChainDeletedBehindOurBack(t *testing.T) {
	fake := iptablestest.NewFake()
	reg := metrics.New(nil)
	b := newTestBackend(t, fake, func(c *Config) { c.Metrics = reg })
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	svcChain := chainsFor(names[0]).cluster
	sep := endpointChainName(names[0], "10.244.1.1:80")
	for _, op := range []func() error{
		func() error { return fake.FlushChain(runner.IPv4, "nat", svcChain) },
		func() error { return fake.FlushChain(runner.IPv4, "nat", sep) },
		func() error { return fake.DeleteChain(runner.IPv4, "nat", sep) },
	} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	st = cloneState(st)
	st.Endpoints[names[0]] = st.Endpoints[names[0]][:2] // SVC chain rewritten, still jumping to sep
	before := fake.DumpAll(runner.IPv4)
	if _, err := b.Sync(context.Background(), st, changedDiff(false, names[0])); err == nil {
		t.Fatalf("partial sync jumping to a deleted chain succeeded")
	}
	if d := cmp.Diff(before, fake.DumpAll(runner.IPv4)); d != "" {
		t.Errorf("failed sync changed the tables:\n%s", d)
	}
	if got := metricValue(reg.IPTablesPartialRestoreFailuresTotal.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("partial restore failures = %v, want 1", got)
	}
	if got := metricValue(reg.IPTablesRestoreFailuresTotal.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("restore failures = %v, want 1", got)
	}
	if res := mustSync(t, b, st, changedDiff(false, names[1])); !res.Full {
		t.Errorf("sync after a failure was partial")
	}
	assertMatchesReference(t, fake, nil, st)
}

// TestFailedRestoreKeepsRules: an injected restore failure leaves the
// previous rules, is counted, and the next sync is full.
func TestFailedRestoreKeepsRules(t *testing.T) {
	fake := iptablestest.NewFake()
	reg := metrics.New(nil)
	b := newTestBackend(t, fake, func(c *Config) { c.Metrics = reg })
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	before := fake.DumpAll(runner.IPv4)

	st2 := cloneState(st)
	st2.Endpoints[names[2]] = []proxier.Endpoint{ep("10.244.9.3:53")}
	fake.FailNextRestores(1)
	_, err := b.Sync(context.Background(), st2, changedDiff(false, names[2]))
	if !errors.Is(err, iptablestest.ErrInjected) {
		t.Fatalf("Sync error = %v, want the injected failure", err)
	}
	if d := cmp.Diff(before, fake.DumpAll(runner.IPv4)); d != "" {
		t.Errorf("failed sync changed the tables:\n%s", d)
	}
	if got := metricValue(reg.IPTablesRestoreFailuresTotal.WithLabelValues("IPv4")); got != 1 {
		t.Errorf("restore failures = %v, want 1", got)
	}
	if res := mustSync(t, b, st2, changedDiff(false)); !res.Full {
		t.Errorf("sync after a failure was partial")
	}
	assertMatchesReference(t, fake, nil, st2)
}

// TestFailedChunkLeavesValidRules: a full sync failing half-way leaves a
// valid mix (the fake accepted every committed chunk), and the next full
// sync completes it.
func TestFailedChunkLeavesValidRules(t *testing.T) {
	fake := iptablestest.NewFake()
	small := func(c *Config) { c.ChunkRules = 50 }
	b := newTestBackend(t, fake, small)
	mustSync(t, b, bigState(40, 3), fullDiff())
	st := bigState(60, 4)
	n := len(fake.Restores())
	// Let three chunks commit, then fail.
	b.runner = &failAfter{Fake: fake, ok: 3}
	if _, err := b.Sync(context.Background(), st, fullDiff()); err == nil {
		t.Fatal("sync with a failing chunk succeeded")
	}
	if got := len(restoresSince(fake, n)); got != 3 {
		t.Fatalf("%d chunks committed before the failure, want 3", got)
	}
	b.runner = fake
	mustSync(t, b, st, changedDiff(false))
	assertMatchesReference(t, fake, small, st)
}

// failAfter lets ok restores through to the fake, then fails them all.
type failAfter struct {
	*iptablestest.Fake
	ok int
}

func (f *failAfter) Restore(ctx context.Context, fam runner.Family, data []byte) error {
	if f.ok == 0 {
		return &runner.RestoreError{Err: errors.New("injected")}
	}
	f.ok--
	return f.Fake.Restore(ctx, fam, data)
}

// TestChunkedFullSync: no payload exceeds the bound unless it is a single
// chain larger than it; every chunk is accepted on its own (so each
// intermediate state only jumps to existing chains); deletions of stale
// chains are chunked too; the end state equals a one-transaction sync.
func TestChunkedFullSync(t *testing.T) {
	const bound = 200
	fake := iptablestest.NewFake()
	chunked := func(c *Config) { c.ChunkRules = bound }
	b := newTestBackend(t, fake, chunked)
	// The first sync into a near-empty table is one transaction
	// (TestFirstSyncOneTransaction); the full syncs after it are chunked.
	mustSync(t, b, bigState(50, 2), fullDiff())
	for _, st := range []*proxier.State{bigState(300, 5), bigState(120, 2), bigState(310, 6)} {
		n := len(fake.Restores())
		mustSync(t, b, st, fullDiff())
		calls := restoresSince(fake, n)
		if len(calls) < 2 {
			t.Fatalf("full sync of %d services made %d restores, want chunks", len(st.Services), len(calls))
		}
		for i, c := range calls {
			lines := strings.Count(string(c.Data), "\n")
			declared, deleted := payloadChains(c.Data)
			body := lines - 2*countTables(c.Data) // "*table" and "COMMIT" lines
			if body > bound && len(declared) != 1 {
				t.Errorf("restore %d: %d lines over %d chains exceeds the bound %d", i, body, len(declared), bound)
			}
			_ = deleted
		}
		assertMatchesReference(t, fake, nil, st)
	}
}

func countTables(data []byte) int { return strings.Count(string(data), "COMMIT\n") }

// TestLegacyOneTransaction: on legacy iptables a full sync is one restore.
func TestLegacyOneTransaction(t *testing.T) {
	fake := iptablestest.NewFake()
	fake.SetMode(runner.ModeLegacy)
	b := newTestBackend(t, fake, func(c *Config) { c.ChunkRules = 10 })
	mustSync(t, b, bigState(100, 3), fullDiff())
	if got := len(fake.Restores()); got != 1 {
		t.Errorf("legacy full sync made %d restores, want 1", got)
	}
}

// TestLeftoversDeleted: service chains left by an earlier run are deleted
// by the first full sync; other programs' chains stay.
func TestLeftoversDeleted(t *testing.T) {
	fake := iptablestest.NewFake()
	old := strings.Join([]string{"*nat", ":KUBE-SERVICES - [0:0]", ":KUBE-SVC-OLDOLDOLDOLDOLD1 - [0:0]",
		":KUBE-SEP-OLDOLDOLDOLDOLD1 - [0:0]", ":OTHER-CHAIN - [0:0]",
		"-A KUBE-SERVICES -d 10.96.9.9/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-OLDOLDOLDOLDOLD1",
		"-A KUBE-SVC-OLDOLDOLDOLDOLD1 -j KUBE-SEP-OLDOLDOLDOLDOLD1",
		"-A KUBE-SEP-OLDOLDOLDOLDOLD1 -p tcp -m tcp -j DNAT --to-destination 10.244.9.9:80",
		"-A OTHER-CHAIN -j RETURN", "COMMIT", ""}, "\n")
	if err := fake.Restore(context.Background(), runner.IPv4, []byte(old)); err != nil {
		t.Fatal(err)
	}
	b := newTestBackend(t, fake, nil)
	st, _ := partialFixture()
	mustSync(t, b, st, fullDiff())
	chains := fake.Chains(runner.IPv4, "nat")
	for _, c := range []string{"KUBE-SVC-OLDOLDOLDOLDOLD1", "KUBE-SEP-OLDOLDOLDOLDOLD1"} {
		if slices.Contains(chains, c) {
			t.Errorf("leftover %s not deleted", c)
		}
	}
	if !slices.Contains(chains, "OTHER-CHAIN") {
		t.Errorf("another program's chain was deleted")
	}
}

// TestCleanup removes our jumps and chains and nothing else.
func TestCleanup(t *testing.T) {
	fake := iptablestest.NewFake()
	b := newTestBackend(t, fake, func(c *Config) {
		c.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		c.LocalhostNodePorts = true
	})
	tc := goldenCases()
	mustSync(t, b, tc[len(tc)-1].state, fullDiff()) // dual-stack
	foreign := "*nat\n:OTHER-CHAIN - [0:0]\n-A PREROUTING -j OTHER-CHAIN\nCOMMIT\n"
	if err := fake.Restore(context.Background(), runner.IPv4, []byte(foreign)); err != nil {
		t.Fatal(err)
	}
	// The ipvs mode jumps to chains of the same names from built-in
	// chains this mode does not use; cleanup must remove those jumps too
	// or the chains cannot be deleted.
	ipvsJumps := "*filter\n-A INPUT -m comment --comment \"ipvs jump\" -j KUBE-SERVICES\n-A OUTPUT -j KUBE-EXTERNAL-SERVICES\nCOMMIT\n" +
		"*nat\n:KUBE-NODE-PORT - [0:0]\n-A KUBE-NODE-PORT -p tcp -j KUBE-MARK-MASQ\nCOMMIT\n"
	if err := fake.Restore(context.Background(), runner.IPv4, []byte(ipvsJumps)); err != nil {
		t.Fatal(err)
	}
	if err := b.Cleanup(context.Background()); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	for _, fam := range []runner.Family{runner.IPv4, runner.IPv6} {
		for _, tbl := range []string{"mangle", "filter", "nat"} {
			for _, c := range fake.Chains(fam, tbl) {
				// KUBE-NODE-PORT is the ipvs mode's: its cleanup deletes
				// it; ours only removes its jump into our chains.
				if strings.HasPrefix(c, "KUBE-") && c != chainKubeletFirewall && c != "KUBE-NODE-PORT" {
					t.Errorf("%s %s: chain %s left", fam, tbl, c)
				}
			}
			for _, line := range strings.Split(fake.Dump(fam, tbl), "\n") {
				// KUBE-FIREWALL and its jumps are kubelet's: they stay.
				if strings.Contains(line, "KUBE-") && !strings.Contains(line, chainKubeletFirewall) && line != ":KUBE-NODE-PORT - [0:0]" {
					t.Errorf("%s %s: left: %s", fam, tbl, line)
				}
			}
		}
	}
	if nat := fake.Dump(runner.IPv4, "nat"); !strings.Contains(nat, "-A PREROUTING -j OTHER-CHAIN") {
		t.Errorf("another program's rule was removed:\n%s", nat)
	}
	// A sync after cleanup starts over.
	mustSync(t, b, tc[len(tc)-1].state, fullDiff())
}

// TestMetrics: rule totals and last-sync counts after full and partial
// syncs.
func TestMetrics(t *testing.T) {
	fake := iptablestest.NewFake()
	reg := metrics.New(nil)
	b := newTestBackend(t, fake, func(c *Config) { c.Metrics = reg })
	st, names := partialFixture()
	mustSync(t, b, st, fullDiff())
	countRules := func(tbl string) int {
		n := 0
		for _, line := range strings.Split(fake.Dump(runner.IPv4, tbl), "\n") {
			if strings.HasPrefix(line, "-A KUBE-") {
				n++
			}
		}
		return n
	}
	for _, tbl := range []string{"nat", "filter"} {
		if got, want := metricValue(reg.IPTablesRulesTotal.WithLabelValues(tbl, "IPv4")), countRules(tbl); int(got) != want {
			t.Errorf("%s total = %v, want %d", tbl, got, want)
		}
		if got, want := metricValue(reg.IPTablesRulesLastSync.WithLabelValues(tbl, "IPv4")), countRules(tbl); int(got) != want {
			t.Errorf("%s last after full sync = %v, want %d", tbl, got, want)
		}
	}
	st = cloneState(st)
	st.Endpoints[names[1]] = []proxier.Endpoint{ep("10.244.7.2:80")}
	mustSync(t, b, st, changedDiff(false, names[1]))
	// The new SEP chain (2 rules) and the SVC chain (masquerade + 1).
	if got := metricValue(reg.IPTablesRulesLastSync.WithLabelValues("nat", "IPv4")); got != 4 {
		t.Errorf("nat last after a one-endpoint sync = %v, want 4", got)
	}
	if got, want := metricValue(reg.IPTablesRulesTotal.WithLabelValues("nat", "IPv4")), countRules("nat"); int(got) != want {
		t.Errorf("nat total after partial = %v, want %d", got, want)
	}
}

// metricValue reads a counter or gauge.
func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}
