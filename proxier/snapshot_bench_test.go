package proxier

import (
	"fmt"
	"testing"
)

// BenchmarkSnapshotOneEndpointChange is the core's share of a
// one-endpoint change: the tracker update and the snapshot, with n
// service ports of one endpoint each already applied. The snapshot copies
// the State's two maps (see TestSnapshotStatesAreIndependent), so its
// cost grows with n.
//
//	go test ./proxier -run '^$' -bench SnapshotOneEndpointChange -benchmem
func BenchmarkSnapshotOneEndpointChange(b *testing.B) {
	for _, n := range []int{10000, 88000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			snap := NewSnapshotter("node-a", nil)
			for i := range n {
				name := fmt.Sprintf("s-%06d", i)
				snap.Services.Update(nil, makeService(name, withClusterIPs(fmt.Sprintf("10.%d.%d.%d", 96+i/62500, i/250%250, i%250+1))))
				snap.Endpoints.Update(makeSlice(name, name+"-1", []sliceEP{ep(fmt.Sprintf("10.1.%d.%d", i/250%250, i%250+1))}), false)
			}
			snap.Snapshot()
			two := [2]*sliceInfo{
				snap.Endpoints.convert(makeSlice("s-000001", "s-000001-1", []sliceEP{ep("10.200.0.1")})),
				snap.Endpoints.convert(makeSlice("s-000001", "s-000001-1", []sliceEP{ep("10.200.0.2")})),
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				snap.Endpoints.update(two[i%2], false)
				if _, diff := snap.Snapshot(); len(diff.Changed) != 1 {
					b.Fatalf("changed %v, want one port", diff.Changed)
				}
			}
		})
	}
}
