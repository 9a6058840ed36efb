package iptables

import (
	"strings"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// jumpsTo counts the rules of a built-in chain that jump to target.
func jumpsTo(fake *iptablestest.Fake, tbl, from, target string) int {
	n := 0
	for _, r := range fake.Rules(runner.IPv4, tbl, from) {
		if len(r.Args) >= 2 && r.Args[len(r.Args)-2] == "-j" && r.Args[len(r.Args)-1] == target {
			n++
		}
	}
	return n
}

// TestFirstSyncOneTransaction: on iptables-nft the first sync into
// near-empty tables is one restore whose sections start with "-S",
// followed by one small restore adding the missing jumps from the
// built-in chains (not listed: see firstSyncPlan.attach); no jump is
// ensured by a separate iptables call, and the result is the reference
// state.
func TestFirstSyncOneTransaction(t *testing.T) {
	fake := iptablestest.NewFake()
	st := bigState(300, 5)
	mustSync(t, newTestBackend(t, fake, func(c *Config) { c.ChunkRules = 200 }), st, fullDiff())
	var v4 []string
	for _, c := range fake.Restores() {
		if c.Family == runner.IPv4 {
			v4 = append(v4, string(c.Data))
		}
	}
	if len(v4) != 2 {
		t.Fatalf("first sync made %d IPv4 restores, want 2 (rules, jumps)", len(v4))
	}
	for _, tbl := range allTables() {
		if !strings.Contains(v4[0], "*"+string(tbl)+"\n-S\n") {
			t.Errorf("section %s does not start with -S:\n%.300s", tbl, v4[0])
		}
	}
	if strings.Contains(v4[1], "\n-S\n") || strings.Contains(v4[1], ":KUBE") {
		t.Errorf("the jumps' restore lists a table or declares a chain:\n%s", v4[1])
	}
	if !strings.Contains(v4[1], "-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n") {
		t.Errorf("the jumps' restore lacks the PREROUTING jump:\n%s", v4[1])
	}
	if got := jumpsTo(fake, "nat", "PREROUTING", chainServices); got != 1 {
		t.Errorf("PREROUTING holds %d jumps to KUBE-SERVICES, want 1", got)
	}
	assertMatchesReference(t, fake, nil, st)
}

// TestFirstSyncAfterRestart: a restarted daemon finds its jumps in place
// and adds none; over a table too big to list cheaply it keeps chunking
// and writes no "-S".
func TestFirstSyncAfterRestart(t *testing.T) {
	fake := iptablestest.NewFake()
	chunked := func(c *Config) { c.ChunkRules = 200 }
	mustSync(t, newTestBackend(t, fake, chunked), bigState(500, 5), fullDiff())
	n := len(fake.Restores())
	st := bigState(490, 5)
	mustSync(t, newTestBackend(t, fake, chunked), st, fullDiff())
	calls := restoresSince(fake, n)
	if len(calls) < 2 {
		t.Errorf("first sync over %d leftover rules made %d restores, want chunks", 500*16, len(calls))
	}
	for i, c := range calls {
		if strings.Contains(string(c.Data), "\n-S\n") || strings.Contains(string(c.Data), "\n-I ") {
			t.Errorf("restore %d lists a big table or inserts a jump that exists:\n%.300s", i, c.Data)
		}
	}
	for _, j := range jumpRules(false, false, true) {
		if got := jumpsTo(fake, string(j.table), j.from, j.to); got != 1 {
			t.Errorf("%s/%s holds %d jumps to %s, want 1", j.table, j.from, got, j.to)
		}
	}
	assertMatchesReference(t, fake, nil, st)
}

// TestFirstSyncLegacyNoListing: legacy iptables-restore gets no "-S" (its
// libiptc has no per-command chain list) but still one transaction with
// the jumps in it.
func TestFirstSyncLegacyNoListing(t *testing.T) {
	fake := iptablestest.NewFake()
	fake.SetMode(runner.ModeLegacy)
	st := bigState(100, 3)
	mustSync(t, newTestBackend(t, fake, nil), st, fullDiff())
	for _, c := range fake.Restores() {
		if strings.Contains(string(c.Data), "\n-S\n") {
			t.Errorf("legacy payload lists a table")
		}
	}
	if got := jumpsTo(fake, "filter", "FORWARD", chainForward); got != 1 {
		t.Errorf("FORWARD holds %d jumps to KUBE-FORWARD, want 1", got)
	}
	assertMatchesReference(t, fake, nil, st)
}
