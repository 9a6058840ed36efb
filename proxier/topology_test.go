package proxier

import (
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestTopologyInterner(t *testing.T) {
	in := newTopologyInterner()
	hints := func(zones ...string) *discovery.EndpointHints {
		h := &discovery.EndpointHints{ForNodes: []discovery.ForNode{{Name: "n1"}}}
		for _, z := range zones {
			h.ForZones = append(h.ForZones, discovery.ForZone{Name: z})
		}
		return h
	}
	if got := in.get(nil, nil); got != nil {
		t.Errorf("no zone, no hints: %+v, want nil", got)
	}
	a := in.get(ptr.To("z1"), hints("z1", "z2"))
	want := &EndpointTopology{Zone: "z1", ZoneHints: []string{"z1", "z2"}, NodeHints: []string{"n1"}}
	if d := cmp.Diff(want, a); d != "" {
		t.Errorf("topology (-want +got):\n%s", d)
	}
	if b := in.get(ptr.To("z1"), hints("z1", "z2")); b != a {
		t.Error("the same zone and hints gave two topologies")
	}
	distinct := []*EndpointTopology{
		a, in.get(ptr.To("z1"), hints("z1")), in.get(ptr.To("z1"), hints("z1z2")),
		in.get(ptr.To("z1"), hints("")), in.get(ptr.To("z1"), hints()), in.get(ptr.To("z2"), nil),
	}
	for i := range distinct {
		for j := range i {
			if distinct[i] == distinct[j] {
				t.Errorf("topologies %d and %d are shared: %+v", i, j, distinct[i])
			}
		}
	}
	if in.size() != len(distinct) {
		t.Errorf("%d topologies remembered, want %d", in.size(), len(distinct))
	}
	// Once no endpoint uses them they are forgotten.
	a, distinct = nil, nil
	deadline := time.Now().Add(hangGuard)
	for in.size() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d unused topologies still remembered", in.size())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}
