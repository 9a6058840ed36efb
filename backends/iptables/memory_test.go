package iptables

import (
	"reflect"
	"testing"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// TestPartialSyncsGiveBackMapsAfterMassDeletion: after thousands of
// service ports are added and deleted by partial syncs, the record of
// what the backend installed is replaced by a copy sized for what is left,
// so the space of the deleted entries can be freed (Go maps never shrink).
// (The previous ruleset's services map is cloned on every partial sync,
// so it is a new object anyway; the e2e burst test's heap profile covers
// its size.)
func TestPartialSyncsGiveBackMapsAfterMassDeletion(t *testing.T) {
	b := newTestBackend(t, iptablestest.NewFake(), nil)
	big := bigState(3000, 2)
	small := stateOf([]string{"192.168.1.10"}, nil, nil)
	mustSync(t, b, small, fullDiff())

	all := make([]proxier.ServicePortName, 0, len(big.Services))
	for n := range big.Services {
		all = append(all, n)
	}
	mustSync(t, b, big, changedDiff(true, all...))
	f := b.families[0]
	installed := f.installed.chains
	if len(installed) < 3000*3 || len(f.prev.services) != 3000 {
		t.Fatalf("after the additions: %d installed chains, %d services", len(installed), len(f.prev.services))
	}
	mustSync(t, b, small, changedDiff(true, all...))
	if n := len(f.installed.chains); n > 30 {
		t.Fatalf("%d chains still installed after the deletions", n)
	}
	if sameMap(f.installed.chains, installed) {
		t.Error("the map of installed chains sized for 3,000 service ports was kept after all were deleted")
	}
}

func sameMap(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
