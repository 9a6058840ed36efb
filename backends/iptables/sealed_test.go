package iptables

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
)

// TestSealedRenderWritesTheRender: a full sync's sealed render holds no
// service chain's rules, and its payload, rendered again port by port,
// is the payload of the plain render.
func TestSealedRenderWritesTheRender(t *testing.T) {
	fc := testConfig().forFamily(v1.IPv4Protocol)
	st := bigState(30, 3)
	sealed, plain := renderSealed(fc, st), render(fc, st)
	for _, n := range sealed.names {
		for _, c := range sealed.services[n].chains {
			if c.rules != nil || c.sealed == nil {
				t.Fatalf("chain %s kept its rules in the sealed render", c.key.name)
			}
		}
	}
	want := planTransactions(plain.chains(), nil, 0)[0]
	got := planTransactions(sealed.chains(), nil, 0)[0]
	got.rerender = newRerenderer(fc, st)
	if diff := cmp.Diff(string(mustPayload(t, want)), string(mustPayload(t, got))); diff != "" {
		t.Errorf("sealed payload (-plain +sealed):\n%s", diff)
	}
}

// TestSealedRenderThatDiffersAbortsTheRestore: when a port renders
// differently while the payload is written than when the sync was planned
// (the State changed under the sync), the payload fails, the streamed
// restore is aborted and nothing is applied.
func TestSealedRenderThatDiffersAbortsTheRestore(t *testing.T) {
	fc := testConfig().forFamily(v1.IPv4Protocol)
	st := bigState(30, 3)
	tx := planTransactions(renderSealed(fc, st).chains(), nil, 0)[0]
	changed := bigState(30, 3)
	name := spn("bench", "svc-12", "http", v1.ProtocolTCP)
	changed.Endpoints[name] = benchEndpoints(12, 3, 1)
	tx.rerender = newRerenderer(fc, changed)

	fake := iptablestest.NewFake()
	before := fake.DumpAll(runner.IPv4)
	err := (&streamingFake{Fake: fake}).RestoreFrom(context.Background(), runner.IPv4, streamedPayload{tx})
	if err == nil || !strings.Contains(err.Error(), "renders differently") {
		t.Fatalf("RestoreFrom = %v, want the render mismatch", err)
	}
	if after := fake.DumpAll(runner.IPv4); after != before {
		t.Errorf("an aborted restore changed the tables:\n%s", after)
	}
}
