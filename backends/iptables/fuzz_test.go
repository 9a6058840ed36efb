package iptables

import (
	"context"
	"io"
	"net/netip"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"github.com/switchyard-proxy/switchyard/internal/iptables/iptablestest"
	"github.com/switchyard-proxy/switchyard/internal/iptables/runner"
	"github.com/switchyard-proxy/switchyard/proxier"
)

// FuzzSyncFromObjects drives the whole path a buggy controller's objects
// take: Services, EndpointSlices and the Node built from fuzzed fields
// (bad IPs, ports out of range, unknown protocols and families, nil
// fields, huge port lists, 1,000-endpoint slices, duplicated and
// conflicting slices) go through the proxier's trackers and snapshots,
// shared endpoint selection and the render, into dual-stack syncs against
// the strict fake. It must never panic, the fake (which rejects what
// iptables-restore rejects) must accept every sync, and after the
// sequence of partial syncs the tables must equal a fresh full sync.
//
// `go test` runs the seeds below and testdata/fuzz/FuzzSyncFromObjects;
// explore with `go test -fuzz FuzzSyncFromObjects ./backends/iptables/`.
func FuzzSyncFromObjects(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	// Every malformed object logs a line: keep the fuzzer's output readable.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	f.Cleanup(func() { klog.SetOutput(os.Stderr); klog.LogToStderr(true) })
	f.Fuzz(func(t *testing.T, data []byte) {
		w := newFuzzWorld(t)
		in := &fuzzInput{b: data}
		for step := 0; step < 24 && !in.done(); step++ {
			w.step(in)
		}
		st := w.sync()
		for _, sp := range st.Services {
			for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				checkSelection(t, sp, st.Endpoints[sp.Name], st.Node, fam)
			}
		}
		assertMatchesReference(t, w.fake, fuzzConfig, st)
	})
}

// fuzzSeeds are hand-written starting points: one valid service with
// endpoints, a huge port list, a 1,000-endpoint slice, and conflicting
// slices of both families.
func fuzzSeeds() [][]byte {
	return [][]byte{
		// upsert service ns1/a (ClusterIP 10.96.0.1, one TCP port 80), then
		// a slice with two ready endpoints, then sync.
		{0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 5},
		{0, 1, 0, 1, 0, 2, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 5, 2, 1, 0, 1, 0, 0, 1, 0, 0x20, 5},
		{2, 0, 0, 0, 1, 0, 0, 1, 1, 3, 1, 0, 0x20, 0, 0, 5, 0, 0, 0, 0, 0, 5},
		{0, 0, 2, 1, 2, 2, 3, 1, 1, 7, 2, 1, 2, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1, 2, 2, 1, 1, 3, 3, 2, 3, 4, 5, 3, 1, 2, 4, 5},
		{4, 1, 1, 1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 5, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 5, 1, 0, 0, 5},
	}
}

// fuzzConfig is dual-stack with nodeport addresses, so both renders and
// every family filter run.
func fuzzConfig(c *Config) {
	c.Families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	c.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("fd00:1::/64")}
	c.ChunkRules = 300
}

// fuzzWorld holds the objects "in the API" and the path under test.
type fuzzWorld struct {
	t        *testing.T
	snap     *proxier.Snapshotter
	fake     *iptablestest.Fake
	backend  *Backend
	services map[string]*v1.Service
	slices   map[string]*discovery.EndpointSlice
}

func newFuzzWorld(t *testing.T) *fuzzWorld {
	fake := iptablestest.NewFake()
	return &fuzzWorld{
		t: t, fake: fake, backend: newTestBackend(t, fake, fuzzConfig),
		snap:     proxier.NewSnapshotter(testNode, nil),
		services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{},
	}
}

// step applies one operation chosen by the input.
func (w *fuzzWorld) step(in *fuzzInput) {
	ns, name := pick(in, fuzzNamespaces), pick(in, fuzzNames)
	key := ns + "/" + name
	switch in.intn(6) {
	case 0:
		cur := fuzzService(in, ns, name)
		w.snap.Services.Update(w.services[key], cur)
		w.services[key] = cur
	case 1:
		if old := w.services[key]; old != nil {
			w.snap.Services.Update(old, nil)
			delete(w.services, key)
		}
	case 2:
		sliceKey := key + "-" + pick(in, []string{"1", "2"})
		s := fuzzSlice(in, ns, name, name+sliceKey[len(key):])
		w.snap.Endpoints.Update(s, false)
		w.slices[sliceKey] = s
	case 3:
		sliceKey := key + "-" + pick(in, []string{"1", "2"})
		if s := w.slices[sliceKey]; s != nil {
			w.snap.Endpoints.Update(s, true)
			delete(w.slices, sliceKey)
		}
	case 4:
		w.snap.UpdateNode(fuzzNode(in))
	default:
		w.sync()
	}
}

// sync snapshots and syncs; the strict fake must accept it.
func (w *fuzzWorld) sync() *proxier.State {
	w.t.Helper()
	st, diff := w.snap.Snapshot()
	if _, err := w.backend.Sync(context.Background(), st, diff); err != nil {
		w.t.Fatalf("sync rejected: %v\nipv4:\n%s\nipv6:\n%s", err, w.fake.DumpAll(runner.IPv4), w.fake.DumpAll(runner.IPv6))
	}
	return st
}

// checkSelection checks the shared selection's invariants: it only picks
// endpoints of the family from the service's own, each at most once, and
// local ones are on this node.
func checkSelection(t *testing.T, sp *proxier.ServicePort, all []proxier.Endpoint, node proxier.NodeInfo, fam v1.IPFamily) {
	t.Helper()
	sel := proxier.SelectEndpoints(sp, all, node, fam)
	known := map[netip.AddrPort]bool{}
	for _, e := range all {
		known[e.Key()] = true
	}
	for _, set := range [][]proxier.Endpoint{sel.Internal(sp), sel.External(sp), sel.Local, sel.AllReachable} {
		seen := map[netip.AddrPort]bool{}
		for _, e := range set {
			if !known[e.Key()] || seen[e.Key()] || proxier.FamilyOf(e.IP) != fam {
				t.Fatalf("%s %s: selection returned %s (unknown, duplicated or of another family)", sp.Name, fam, e)
			}
			seen[e.Key()] = true
		}
	}
	for _, e := range sel.Local {
		if !e.IsLocal {
			t.Fatalf("%s %s: local selection holds %s of node %q", sp.Name, fam, e, e.NodeName)
		}
	}
}
